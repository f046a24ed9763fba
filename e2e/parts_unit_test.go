package e2e

import (
	"slices"
	"strings"
	"testing"
)

// failureLines keeps what a CI log's reader needs at its end: each failed
// test, its panic, and the indented log under them, and nothing else.
func TestFailureLines(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{
			name: "a failed subtest and its log",
			in: `=== RUN   TestA
--- PASS: TestA (0.01s)
--- FAIL: TestB (1.00s)
    --- FAIL: TestB/sub (0.50s)
        b_test.go:10: want 1, got 2
ok  	other	0.1s`,
			want: []string{"--- FAIL: TestB (1.00s)", "    --- FAIL: TestB/sub (0.50s)", "        b_test.go:10: want 1, got 2"},
		},
		{
			name: "a panic and its goroutine trace stops at the first unindented line",
			in: `panic: boom
    main.go:1
goroutine 1 [running]:
    main.go:2`,
			want: []string{"panic: boom", "    main.go:1"},
		},
		{
			name: "an indented log of a passing test is not kept",
			in: `--- PASS: TestC (0.01s)
    c_test.go:5: fine`,
			want: nil,
		},
		{
			name: "at most maxFailureLines lines of log under a failure",
			in:   "--- FAIL: TestD (0.01s)\n" + strings.Repeat("    d_test.go:1: again\n", maxFailureLines+5),
			want: append([]string{"--- FAIL: TestD (0.01s)"}, slices.Repeat([]string{"    d_test.go:1: again"}, maxFailureLines)...),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f failureLines
			var got []string
			for _, l := range strings.Split(tt.in, "\n") {
				if f.keep(l) {
					got = append(got, l)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("kept\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}
