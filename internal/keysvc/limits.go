package keysvc

import (
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// RateLimit bounds the requests of one client (by IP address): Rate per
// second with bursts of Burst. The zero value is no limit.
type RateLimit struct {
	Rate  float64
	Burst int
	// TrustProxy takes the client from the first X-Forwarded-For address
	// (keysvc behind a reverse proxy); otherwise from the connection.
	TrustProxy bool
}

// clientLimiter holds one token bucket per client and forgets clients idle
// for ten minutes.
type clientLimiter struct {
	cfg     RateLimit
	mu      sync.Mutex
	clients map[string]*clientBucket
	swept   time.Time
}

type clientBucket struct {
	lim  *rate.Limiter
	seen time.Time
}

func newClientLimiter(cfg RateLimit) *clientLimiter {
	if cfg.Burst < 1 {
		cfg.Burst = max(1, int(math.Ceil(2*cfg.Rate)))
	}
	return &clientLimiter{cfg: cfg, clients: map[string]*clientBucket{}, swept: time.Now()}
}

// allow takes one request from client's bucket, or says how long to wait.
func (l *clientLimiter) allow(client string) (bool, time.Duration) {
	now := time.Now()
	l.mu.Lock()
	if now.Sub(l.swept) > time.Minute {
		for c, b := range l.clients {
			if now.Sub(b.seen) > 10*time.Minute {
				delete(l.clients, c)
			}
		}
		l.swept = now
	}
	b, ok := l.clients[client]
	if !ok {
		b = &clientBucket{lim: rate.NewLimiter(rate.Limit(l.cfg.Rate), l.cfg.Burst)}
		l.clients[client] = b
	}
	b.seen = now
	l.mu.Unlock()
	r := b.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// clientOf returns the address the limits apply to.
func (l *clientLimiter) clientOf(r *http.Request) string {
	if l.cfg.TrustProxy {
		if xff := r.Header.Get("X-Forwarded-For"); xff != "" {
			first, _, _ := strings.Cut(xff, ",")
			return strings.TrimSpace(first)
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// limit answers 429 with Retry-After when the client is over its rate.
func (s *Server) limit(w http.ResponseWriter, r *http.Request) bool {
	if s.limiter == nil {
		return true
	}
	ok, wait := s.limiter.allow(s.limiter.clientOf(r))
	if ok {
		return true
	}
	s.metrics.limited.WithLabelValues("rate").Inc()
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(wait.Seconds())))))
	writeError(w, http.StatusTooManyRequests, "rate_limited", "too many requests from this client; retry after the delay in Retry-After")
	return false
}

// LimitConnections wraps l so that one client (by IP address) holds at most
// perClient connections at once: a connection beyond that is closed as soon
// as it is accepted, so one client's idle connections cannot take the
// others' place.
func (s *Server) LimitConnections(l net.Listener, perClient int) net.Listener {
	return &connLimiter{Listener: l, per: perClient, open: map[string]int{}, rejected: func() { s.metrics.limited.WithLabelValues("connections").Inc() }}
}

type connLimiter struct {
	net.Listener
	per      int
	mu       sync.Mutex
	open     map[string]int
	rejected func()
}

func (c *connLimiter) Accept() (net.Conn, error) {
	for {
		conn, err := c.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host, _, _ := net.SplitHostPort(conn.RemoteAddr().String())
		c.mu.Lock()
		if c.open[host] >= c.per {
			c.mu.Unlock()
			c.rejected()
			conn.Close()
			continue
		}
		c.open[host]++
		c.mu.Unlock()
		return &limitedConn{Conn: conn, release: func() {
			c.mu.Lock()
			if c.open[host]--; c.open[host] <= 0 {
				delete(c.open, host)
			}
			c.mu.Unlock()
		}}, nil
	}
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}
