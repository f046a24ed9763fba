package sandbox

import (
	"net"
	"strconv"
	"testing"
)

func TestSpanOutside(t *testing.T) {
	for _, c := range []struct {
		ephLow, ephHigh, low, high int
	}{
		{32768, 60999, 10000, 32768}, // Linux's default: below is larger
		{49152, 65535, 10000, 49152}, // IANA's range
		{1024, 40000, 40001, 65536},  // only above is left
		{1024, 65535, 1024, 65536},   // nothing outside
		{10000, 65535, 1024, 65536},
	} {
		low, high := spanOutside(c.ephLow, c.ephHigh)
		if low != c.low || high != c.high {
			t.Errorf("spanOutside(%d, %d) = [%d, %d), want [%d, %d)", c.ephLow, c.ephHigh, low, high, c.low, c.high)
		}
	}
}

func TestFreePortIsOutsideTheEphemeralRangeAndFree(t *testing.T) {
	ephLow, ephHigh, err := ephemeralRange()
	if err != nil {
		t.Skip("no /proc/sys/net/ipv4/ip_local_port_range:", err)
	}
	for range 20 {
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if port >= ephLow && port <= ephHigh && !(ephLow <= 10000 && ephHigh >= 65535) {
			t.Fatalf("FreePort() = %d, inside the ephemeral range %d-%d", port, ephLow, ephHigh)
		}
		l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
		if err != nil {
			t.Fatalf("FreePort() = %d, and listening on it fails: %v", port, err)
		}
		l.Close()
	}
}
