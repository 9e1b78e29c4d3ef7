# Reads `go test -v` output and prints, for each failed test that has no
# failed subtest, the last lines it logged. The cluster tests log hundreds
# of progress lines, and a CI log that keeps only its tail would otherwise
# show the last subtest (often one that passed), not why another failed.
#
#   go test -v ... | tee log; awk -f hack/failed-tests.awk log
#
# -v output names the running test before its lines (=== RUN, === CONT,
# === NAME) and ends each with --- PASS/FAIL/SKIP; subtests run one at a
# time here, so a test's lines follow its last === line.

BEGIN { keep = 40 }

/^=== (RUN|CONT|NAME) / {
	cur = $3
	if (!(cur in seen)) { seen[cur] = 1; order[++names] = cur }
	next
}

/^ *--- (FAIL|PASS|SKIP): / {
	if ($2 == "FAIL:") failed[$3] = 1
	next
}

# The package's summary lines belong to no test.
/^(FAIL|PASS|ok)([ \t]|$)/ { cur = ""; next }

cur != "" {
	n[cur]++
	line[cur, n[cur]] = $0
}

END {
	header = 0
	for (i = 1; i <= names; i++) {
		t = order[i]
		if (!(t in failed)) continue
		leaf = 1
		for (f in failed) if (index(f, t "/") == 1) leaf = 0
		if (!leaf) continue
		if (!header) { print ""; print "=== what each failed test logged last (hack/failed-tests.awk)"; header = 1 }
		from = n[t] > keep ? n[t] - keep + 1 : 1
		print "--- " t " (" n[t] " lines; the last " (n[t] - from + 1) "):"
		for (j = from; j <= n[t]; j++) print line[t, j]
	}
}
