// Package distance puts a client at a distance from a server: a TCP proxy
// on loopback that delays the bytes of each direction by half a round trip.
//
// What it models is propagation delay, per round trip, not per request:
//
//   - every byte from the client reaches the server RTT/2 after the client
//     sent it, and every byte of the answer reaches the client RTT/2 after
//     the server sent it, in order, as it is sent: a large LIST answer
//     streams (its first bytes arrive RTT/2 after the server wrote them,
//     not after the whole answer), and requests multiplexed on one HTTP/2
//     connection share their round trips, as they do on a real link;
//   - a new connection pays the TCP handshake (the client's first bytes
//     reach the server one RTT later than the delay alone would bring
//     them: its SYN and the server's SYN-ACK), then TLS pays its own
//     round trips through the delayed bytes, and so do HTTP/2's flow
//     control windows (WINDOW_UPDATE frames travel the same delayed way).
//
// It adds nothing else: no bandwidth cap (a direction reads as fast as the
// sender writes and queues what is in flight, up to a bound far above what
// a link carries in a round trip), no loss, no TCP slow start or congestion
// window (which would make large answers at distance slower than here), no
// buffering of whole messages. TLS passes through untouched: the client
// verifies the server's own certificate, whose IP SANs name loopback.
//
// It is part of the test world: product code never imports it.
package distance

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards connections made to Addr to a target, each direction's
// bytes delayed by RTT/2.
type Proxy struct {
	ln     net.Listener
	target string
	rtt    time.Duration

	mu     sync.Mutex
	conns  map[*pair]struct{}
	closed bool
	wg     sync.WaitGroup
	// accepted counts the connections accepted so far.
	accepted int
	// toServer and toClient count the bytes forwarded each way.
	toServer, toClient atomic.Int64
}

// Start listens on a free loopback port and forwards to target (host:port)
// with a round trip of rtt (0: no delay, the proxy's own cost only).
func Start(target string, rtt time.Duration) (*Proxy, error) {
	if rtt < 0 {
		return nil, errors.New("distance: a negative round trip")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, rtt: rtt, conns: map[*pair]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is the proxy's address (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// RTT is the round trip the proxy adds.
func (p *Proxy) RTT() time.Duration { return p.rtt }

// Accepted is the number of connections accepted so far.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Bytes are the bytes forwarded so far to the server and to the client:
// what crossed the wire, TLS records and all.
func (p *Proxy) Bytes() (toServer, toClient int64) {
	return p.toServer.Load(), p.toClient.Load()
}

// Close stops listening, closes every connection and waits for the
// forwarding goroutines to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	err := p.ln.Close()
	for pr := range p.conns {
		pr.abort()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		at := time.Now()
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		pr := &pair{c: c, up: up}
		pr.left.Store(2)
		if !p.track(pr) {
			return
		}
		p.wg.Add(2)
		// The client's connect returned at once; on a real link it would
		// have taken a round trip (SYN, SYN-ACK) before its first bytes
		// left. Those bytes reach the server at at+RTT+RTT/2.
		go p.line(pr, up, c, at.Add(p.rtt), &p.toServer)
		go p.line(pr, c, up, time.Time{}, &p.toClient)
	}
}

// pair is one proxied connection: the client's side and the server's.
type pair struct {
	c, up net.Conn
	// left counts the directions still forwarding.
	left atomic.Int32
}

func (pr *pair) abort() {
	_ = pr.c.Close()
	_ = pr.up.Close()
}

// track registers a pair; false when the proxy is closing.
func (p *Proxy) track(pr *pair) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		pr.abort()
		return false
	}
	p.accepted++
	p.conns[pr] = struct{}{}
	return true
}

// end notes that one direction of pr ended; after both, pr is closed and
// forgotten.
func (p *Proxy) end(pr *pair) {
	if pr.left.Add(-1) > 0 {
		return
	}
	pr.abort()
	p.mu.Lock()
	delete(p.conns, pr)
	p.mu.Unlock()
}

// chunk is bytes read from one side, due at the other side at due; a
// chunk with err ends the direction.
type chunk struct {
	buf *[]byte
	n   int
	due time.Time
	err error
}

// inFlight bounds the chunks in flight in one direction: 4,096 reads of up
// to 64 KiB, far more than a round trip of a few milliseconds carries on
// loopback. Only past it does a direction stop reading (as a full TCP
// window would), so it caps nothing the benchmarks send.
const (
	inFlight  = 4096
	chunkSize = 64 << 10
)

var pool = sync.Pool{New: func() any { b := make([]byte, chunkSize); return &b }}

// line copies src to dst, each read delivered RTT/2 after it was read, in
// order, and not before notBefore+RTT/2, adding what it wrote to sent. At
// src's end it half-closes dst once everything read has been delivered;
// any other error closes the pair.
func (p *Proxy) line(pr *pair, dst, src net.Conn, notBefore time.Time, sent *atomic.Int64) {
	defer p.wg.Done()
	defer p.end(pr)
	half := p.rtt / 2
	first := notBefore.Add(half)
	q := make(chan chunk, inFlight)
	go func() {
		defer close(q)
		for {
			b := pool.Get().(*[]byte)
			n, err := src.Read(*b)
			due := time.Now().Add(half)
			if due.Before(first) {
				due = first
			}
			if n > 0 {
				q <- chunk{buf: b, n: n, due: due}
			} else {
				pool.Put(b)
			}
			if err != nil {
				q <- chunk{err: err, due: due}
				return
			}
		}
	}()
	failed := false
	for ch := range q {
		if failed {
			// Drain, so that the reader never blocks on a full queue.
			if ch.buf != nil {
				pool.Put(ch.buf)
			}
			continue
		}
		if d := time.Until(ch.due); d > 0 {
			time.Sleep(d)
		}
		if ch.err != nil {
			tc, ok := dst.(*net.TCPConn)
			if errors.Is(ch.err, io.EOF) && ok {
				_ = tc.CloseWrite() // the sender's FIN, delayed like its bytes
			} else {
				pr.abort()
			}
			continue
		}
		n, err := dst.Write((*ch.buf)[:ch.n])
		sent.Add(int64(n))
		pool.Put(ch.buf)
		if err != nil {
			failed = true
			pr.abort()
		}
	}
}
