/* unit.h - the one way every Check unit test program runs its suite */
#ifndef TERN_UNIT_H
#define TERN_UNIT_H

#include <check.h>
#include <stdlib.h>

#define N_ELEMENTS(a) (sizeof(a) / sizeof((a)[0]))

/* unit_run - run a suite, exit status 0 only if every test passed */
static inline int unit_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
