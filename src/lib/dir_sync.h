/* dir_sync - make directory entries durable (see dir_sync.c) */
#ifndef TERN_DIR_SYNC_H
#define TERN_DIR_SYNC_H

int dir_sync(const char *dir);
int dir_sync_parent(const char *path);

#endif
