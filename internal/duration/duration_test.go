package duration

import (
	"flag"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"30d", 30 * 24 * time.Hour, true},
		{"720h", 720 * time.Hour, true},
		{"90s", 90 * time.Second, true},
		{"1h30m", 90 * time.Minute, true},
		{"0", 0, true},
		{"1500ms", 1500 * time.Millisecond, true},
		{"0d", 0, false},
		{"-3d", 0, false},
		{"1.5d", 0, false},
		{"d", 0, false},
		{"30", 0, false},
		{"a week", 0, false},
		{"", 0, false},
	} {
		got, err := Parse(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("Parse(%q) = %v, %v; want %v, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

// What Format writes, Parse reads back.
func TestFormatRoundTrips(t *testing.T) {
	for d, want := range map[time.Duration]string{
		30 * 24 * time.Hour: "30d", 5 * time.Minute: "5m", 90 * time.Minute: "1h30m", 10 * time.Second: "10s",
		2 * time.Hour: "2h", 1500 * time.Millisecond: "1.5s", 0: "0s",
	} {
		if got := Format(d); got != want {
			t.Errorf("Format(%v) = %q, want %q", d, got, want)
		}
		if back, err := Parse(Format(d)); err != nil || back != d {
			t.Errorf("Parse(Format(%v)) = %v, %v", d, back, err)
		}
	}
}

func TestVar(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	var d time.Duration
	Var(fs, &d, "retention", 720*time.Hour, "how long")
	if d != 720*time.Hour || fs.Lookup("retention").DefValue != "30d" {
		t.Errorf("default %v, shown %q", d, fs.Lookup("retention").DefValue)
	}
	if err := fs.Parse([]string{"--retention", "45d"}); err != nil || d != 45*24*time.Hour {
		t.Errorf("--retention 45d: %v, %v", d, err)
	}
	if err := fs.Parse([]string{"--retention", "forever"}); err == nil {
		t.Error("--retention forever was accepted")
	}
}
