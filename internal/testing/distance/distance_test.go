package distance

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"testing"
	"time"
)

// echo serves connections on a loopback listener: each line read is
// written back; at the client's end of input it closes its side.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func start(t *testing.T, target string, rtt time.Duration) *Proxy {
	t.Helper()
	p, err := Start(target, rtt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestProxy_bytesArriveWholeAndInOrderBothWays(t *testing.T) {
	p := start(t, echo(t), 2*time.Millisecond)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sent := make([]byte, 16<<20)
	_, _ = rand.Read(sent)
	go func() {
		_, _ = c.Write(sent)
		_ = c.(*net.TCPConn).CloseWrite() // the end of input travels too
	}()
	got, err := io.ReadAll(c) // ends only when the server's close arrives
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, sent) {
		t.Fatalf("echo through the proxy: %d bytes back of %d sent, or in another order", len(got), len(sent))
	}
	if up, down := p.Bytes(); up != int64(len(sent)) || down != int64(len(sent)) {
		t.Errorf("the proxy counted %d bytes to the server and %d to the client, want %d each way", up, down, len(sent))
	}
}

func TestProxy_aRoundTripTakesAtLeastTheRTTAndANewConnectionOneMore(t *testing.T) {
	const rtt = 40 * time.Millisecond
	p := start(t, echo(t), rtt)
	t0 := time.Now()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	exchange := func() {
		if _, err := c.Write([]byte("ping\n")); err != nil {
			t.Fatal(err)
		}
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	exchange()
	if first := time.Since(t0); first < 2*rtt {
		t.Errorf("connect and first exchange took %s; a new connection pays the handshake's round trip and the exchange's: at least %s", first, 2*rtt)
	}
	t1 := time.Now()
	exchange()
	if second := time.Since(t1); second < rtt {
		t.Errorf("an exchange on an open connection took %s, less than the round trip %s", second, rtt)
	}
}

// Requests sent together on one connection share their round trips, as
// HTTP/2 streams on one connection do: the proxy delays bytes, not
// requests. Twenty pipelined exchanges take about one round trip; delayed
// one after the other they would take twenty.
func TestProxy_pipelinedRequestsShareOneRoundTrip(t *testing.T) {
	const rtt = 100 * time.Millisecond
	p := start(t, echo(t), rtt)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if _, err := c.Write([]byte("warm\n")); err != nil { // the handshake's round trip is paid here
		t.Fatal(err)
	}
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	const n = 20
	t0 := time.Now()
	go func() {
		for i := 0; i < n; i++ {
			_, _ = c.Write([]byte("ping\n"))
			time.Sleep(time.Millisecond)
		}
	}()
	for i := 0; i < n; i++ {
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(t0)
	if took < rtt {
		t.Errorf("%d pipelined exchanges took %s, less than one round trip", n, took)
	}
	if took > n*rtt/4 {
		t.Errorf("%d pipelined exchanges took %s: the proxy delays them one after the other (%s), not by the round trip they share", n, took, n*rtt)
	}
}

func TestProxy_closeEndsItsConnections(t *testing.T) {
	p := start(t, echo(t), 0)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if _, err := c.Write([]byte("x\n")); err != nil { // the proxy holds the connection now
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "x\n" {
		t.Fatalf("read %q, %v through the proxy", line, err)
	}
	if got := p.Accepted(); got != 1 {
		t.Errorf("Accepted() = %d, want 1", got)
	}
	done := make(chan error, 1)
	go func() { done <- p.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return while a connection was open")
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := r.ReadByte(); err != io.EOF {
		t.Fatalf("reading a connection of a closed proxy: %v, want EOF", err)
	}
}
