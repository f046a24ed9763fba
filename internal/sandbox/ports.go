package sandbox

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// FreePort returns a TCP port that nobody listens on, for a server that
// may be stopped and started again on it (n8n, PostgreSQL and keysvc in
// the crash tests).
//
// It is drawn outside the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), never with ":0": the kernel gives client
// connections their source ports from that range, so a port picked there
// and released for a restart can be taken by any outgoing connection or
// one lingering in TIME_WAIT, and the restarted server then exits with
// "address in use". Under the e2e tests' load that happened often enough
// to leave the shared n8n dead for every later test.
func FreePort() (int, error) {
	low, high := portsOutsideEphemeral()
	for range 200 {
		port := low + rand.IntN(high-low)
		l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		l.Close()
		return port, nil
	}
	return 0, fmt.Errorf("find a free port: none free among 200 tried in %d-%d", low, high-1)
}

// FreeAddr is FreePort as a 127.0.0.1:PORT address.
func FreeAddr() (string, error) {
	port, err := FreePort()
	if err != nil {
		return "", err
	}
	return "127.0.0.1:" + strconv.Itoa(port), nil
}

// portsOutsideEphemeral returns [low, high): the larger of the spans below
// and above the ephemeral range, leaving the well-known ports alone.
func portsOutsideEphemeral() (low, high int) {
	ephLow, ephHigh, err := ephemeralRange()
	if err != nil {
		ephLow, ephHigh = 32768, 60999 // Linux's default
	}
	return spanOutside(ephLow, ephHigh)
}

// spanOutside picks the span of ports outside [ephLow, ephHigh].
func spanOutside(ephLow, ephHigh int) (low, high int) {
	const floor = 10000 // above the ports services commonly take
	below := max(0, ephLow-floor)
	above := max(0, 65536-(ephHigh+1))
	if below >= above && below > 0 {
		return floor, ephLow
	}
	if above > 0 {
		return ephHigh + 1, 65536
	}
	return 1024, 65536 // the whole range is ephemeral: the bind test is all there is
}

func ephemeralRange() (low, high int, err error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0, errors.New("ip_local_port_range: want two numbers")
	}
	if low, err = strconv.Atoi(f[0]); err != nil {
		return 0, 0, err
	}
	if high, err = strconv.Atoi(f[1]); err != nil {
		return 0, 0, err
	}
	return low, high, nil
}
