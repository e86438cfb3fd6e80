# shellcheck shell=bash disable=SC2154 # sourced by bench/queue-scale.sh
# queue-scale-dead-peer.sh - bench/queue-scale.sh's CASE=dead-peer (see
# the header there): RCPTS recipients for a peer that refuses connections,
# held by its circuit breaker for DURATION seconds while a live peer gets
# mail. Sourced by queue-scale.sh after its checks and helpers (rss,
# show_rss, per_msg, tap.sh); never run on its own.

load_py=$here/rcpt-load.py
[ -r "$load_py" ] || die "$load_py missing"

# scrape - ternd's metrics into $top/metrics, one scrape (one per sample;
# before 19a2186 it cost ternd a walk of the schedule index, for
# tern_queue_recipients)
scrape() {
	curl -s --max-time 10 "http://127.0.0.1:$m_port/metrics" >"$top/metrics"
}

# metric NAME - the series named NAME (with its labels) in the last scrape
metric() {
	awk -v n="$1" '$1 == n { v += $2 } END { printf "%.0f", v }' "$top/metrics"
}

# logged REGEX - lines of ternd's log matching the extended REGEX
logged() {
	grep -cE "$1" "$TERND_LOG"
}

# breaker_opened - the dead peer's breaker opened at least once
breaker_opened() {
	[ "$(logged ': peer dead: circuit breaker open for ')" -gt 0 ]
}

# reopened N - more than N lines say the dead peer's breaker opened
reopened() {
	[ "$(logged ': peer dead: circuit breaker open for ')" -gt "$1" ]
}

# per_min N SECONDS - N per minute
per_min() {
	awk -v n="$1" -v s="$2" 'BEGIN { printf "%.1f", (s > 0 ? n * 60 / s : 0) }'
}

command -v curl >/dev/null || die "curl not installed"
msgs=$((RCPTS / PER_MSG))
echo "== ternd queue scale, dead peer: $((msgs * PER_MSG)) recipients held by the breaker for ${DURATION}s"
case_start "CASE=$CASE RCPTS=$RCPTS PER_MSG=$PER_MSG FILL_SESSIONS=$FILL_SESSIONS DURATION=$DURATION SAMPLE=$SAMPLE LAT_EVERY=$LAT_EVERY" \
	"rcpt-load.py fill 127.0.0.1:PORT $msgs $PER_MSG dead.test $FILL_SESSIONS" "$load_py"
load=$top/bin/rcpt-load.py

dead_port=$(free_port) # nobody listens there: every connection is refused
sink_port=$(free_port)
m_port=$(free_port)
TERND_PEERS=$(printf '%s\n' "[peer dead]" "host = [127.0.0.1]" "port = $dead_port" "tls = none" \
	"[peer live]" "host = [127.0.0.1]" "port = $sink_port" "tls = none" \
	"[routes]" "dead.test = dead" "live.test = live")
export TERND_PEERS
ternd_setup "$top/t" "metrics_listen = 127.0.0.1:$m_port" "max_queue_messages = $((msgs * 2 + 10000))" ||
	die "ternd did not start"
unset TERND_PEERS
echo "ternd:    pid $TERND_PID, smtp 127.0.0.1:$TERND_PORT; peer dead 127.0.0.1:$dead_port (refused), peer live 127.0.0.1:$sink_port (sink)"
echo
sleep "$SETTLE"
read -r base_v base_a base_f <<<"$(rss "$TERND_PID")"
show_rss "0 queued (base)" 0

fill_t0=$(now_us)
out=$(python3 "$load" fill "127.0.0.1:$TERND_PORT" "$msgs" "$PER_MSG" dead.test "$FILL_SESSIONS" 2>&1)
[[ $out == *" failed=0 "* ]] || die "the fill failed: $out"
echo "fill:     $out"
wait_until 60 breaker_opened || die "the dead peer's breaker did not open: $(tail -n 5 "$TERND_LOG")"
total=$(ternq_ stats | awk '$1 == "TOTAL" { print $2 }')
[ "$total" = $((msgs * PER_MSG)) ] || die "ternq stats TOTAL $total, expected $((msgs * PER_MSG)) recipients"
echo "queue:    $msgs messages, $total recipients (ternq stats TOTAL);" \
	"spool $(du -sm "$TERND_DIR/spool" | cut -f1) MB, data.mdb $(($(stat -c %s "$TERND_DIR/state/queue/data.mdb") / 1048576)) MB;" \
	"fill to breaker open $(secs "$fill_t0" "$(now_us)") s"
grep -E ': peer dead: circuit breaker ' "$TERND_LOG" | sed 's/^/  log: /'
sleep "$SETTLE"
read -r fill_v fill_a fill_f <<<"$(rss "$TERND_PID")"
show_rss "after the fill" "$msgs msgs"
echo

tried=tern_connections_tried_total'{peer="dead"}'
lat_n=$((DURATION / LAT_EVERY - 1))
[ "$lat_n" -gt 0 ] || lat_n=1
python3 "$load" latency "127.0.0.1:$TERND_PORT" "$sink_port" "$lat_n" "$LAT_EVERY" live.test >"$top/latency.out" 2>&1 &
lat_pid=$!
tap_bg_register "$lat_pid"

t0=$(now_us)
cpu0=$(proc_cpu_ticks "$TERND_PID")
scrape
com0=$(metric tern_commit_batch_messages_count)
job0=$(metric tern_commit_batch_messages_sum)
try0=$(metric "$tried")
prb0=$(logged ': peer dead: circuit breaker half-open: probing$')
trn0=$(logged ': peer dead: circuit breaker (open|half-open|closed)')
printf '%6s %7s %9s %9s %8s %6s %6s %7s %11s\n' t/s "cpu%" "VmRSS kB" "Anon kB" commits jobs probes "conns" transitions
prev_t=$t0 prev_cpu=$cpu0 prev_com=$com0 prev_job=$job0 prev_try=$try0 prev_prb=$prb0 prev_trn=$trn0
max_com_min=0 max_cpu=0
while :; do
	el=$(((prev_t - t0) / 1000000))
	left=$((DURATION - el))
	[ "$left" -gt 0 ] || break
	[ "$left" -gt "$SAMPLE" ] && left=$SAMPLE
	sleep "$left"
	t=$(now_us)
	cpu=$(proc_cpu_ticks "$TERND_PID")
	scrape
	com=$(metric tern_commit_batch_messages_count)
	job=$(metric tern_commit_batch_messages_sum) try=$(metric "$tried")
	prb=$(logged ': peer dead: circuit breaker half-open: probing$')
	trn=$(logged ': peer dead: circuit breaker (open|half-open|closed)')
	read -r v a _ <<<"$(rss "$TERND_PID")"
	pct=$(awk -v c=$((cpu - prev_cpu)) -v hz="$clk_tck" -v s=$((t - prev_t)) 'BEGIN { printf "%.2f", 100 * c / hz / (s / 1e6) }')
	cm=$(per_min $((com - prev_com)) "$(secs "$prev_t" "$t")")
	printf '%6d %7s %9d %9d %8d %6d %6d %7d %11d\n' $(((t - t0) / 1000000)) "$pct" "$v" "$a" \
		$((com - prev_com)) $((job - prev_job)) $((prb - prev_prb)) $((try - prev_try)) $((trn - prev_trn))
	max_com_min=$(awk -v a="$max_com_min" -v b="$cm" 'BEGIN { print (b > a ? b : a) }')
	max_cpu=$(awk -v a="$max_cpu" -v b="$pct" 'BEGIN { print (b > a ? b : a) }')
	prev_t=$t prev_cpu=$cpu prev_com=$com prev_job=$job prev_try=$try prev_prb=$prb prev_trn=$trn
done
wait "$lat_pid"
lat_rc=$?
hold_s=$(secs "$t0" "$prev_t")
read -r hold_v hold_a hold_f <<<"$(rss "$TERND_PID")"
show_rss "end of the hold" "$msgs msgs"
lat_line=$(tail -n 1 "$top/latency.out")
[ "$lat_rc" -eq 0 ] || echo "latency client failed (exit $lat_rc): $(tail -n 3 "$top/latency.out")"
live=$(grep -c '^sample [0-9]*: -\{0,1\}[0-9.]* ms$' "$top/latency.out")
early=$(grep -c '^sample [0-9]*: -[0-9.]* ms$' "$top/latency.out")
echo "latency:  $lat_line (each: client's 250 -> sink's end of data)"
echo "          $early of $live delivered before the client had read its 250 (negative); all samples (ms):"
echo "          $(sed -n 's/^sample [0-9]*: \(-\{0,1\}[0-9.]*\) ms$/\1/p' "$top/latency.out" | tr '\n' ' ')"
grep -E ': peer dead: circuit breaker ' "$TERND_LOG" | sed 's/^/  log: /'

c1=$(proc_cpu_ticks "$TERND_PID") s0=$(now_us)
for _ in 1 2 3 4 5; do scrape; done
scrape_ms=$(awk -v c=$(($(proc_cpu_ticks "$TERND_PID") - c1)) -v hz="$clk_tck" 'BEGIN { printf "%.0f", 1000 * c / hz / 5 }')
echo "scrape:   one GET /metrics with $(metric 'tern_queue_recipients{peer="dead"}') recipients for peer dead:" \
	"${scrape_ms} ms of ternd CPU (5 in $(secs "$s0" "$(now_us)") s); the hold had one per ${SAMPLE}s"

opens=$(logged ': peer dead: circuit breaker open for ')
ternd_stop || die "ternd exit status $? at stop: $(tail -n 5 "$TERND_LOG")"
ternd_start || die "ternd did not start again"
wait_until 60 reopened "$opens" || echo "after the restart, the dead peer's breaker did not open within 60 s"
sleep "$((SETTLE + 8))"
read -r rst_v rst_a rst_f <<<"$(rss "$TERND_PID")"
show_rss "restarted, 10 s later" "$msgs msgs"
ternd_stop || die "ternd exit status $? at the final stop"

coms=$((prev_com - com0)) jobs=$((prev_job - job0)) tries=$((prev_try - try0))
probes=$((prev_prb - prb0)) trans=$((prev_trn - trn0))
nr=$((msgs * PER_MSG))
echo
echo "== summary (dead peer: $nr recipients in $msgs messages, hold ${hold_s} s)"
echo "ternd CPU over the hold: $(awk -v c=$((prev_cpu - cpu0)) -v hz="$clk_tck" -v s="$hold_s" \
	'BEGIN { printf "%.3f", 100 * c / hz / s }')% of one core (worst ${SAMPLE}s sample $max_cpu%)"
echo "queue-db group commits: $coms ($(per_min "$coms" "$hold_s")/min, worst sample $max_com_min/min), jobs in them: $jobs;" \
	"probes: $probes, live messages: $live (each an acceptance and a delivery)"
echo "dead peer: $tries connections tried ($(awk -v n="$tries" -v s="$hold_s" 'BEGIN { printf "%.4f", n / s }')/s), $trans breaker transitions"
printf '%-30s %10s %10s %10s\n' "RSS growth over the base" VmRSS RssAnon RssFile
for w in fill hold rst; do
	eval "v=\$${w}_v a=\$${w}_a f=\$${w}_f"
	case $w in fill) l="after the fill" ;; hold) l="end of the hold" ;; rst) l="after a restart" ;; esac
	printf '%-30s %10s %10s %10s   (B per recipient; per message: %s %s %s)\n' "$l" \
		"$(per_msg "$base_v" "$v" "$nr")" "$(per_msg "$base_a" "$a" "$nr")" "$(per_msg "$base_f" "$f" "$nr")" \
		"$(per_msg "$base_v" "$v" "$msgs")" "$(per_msg "$base_a" "$a" "$msgs")" "$(per_msg "$base_f" "$f" "$msgs")"
done
