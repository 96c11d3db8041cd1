package redisstore_test

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// linkMode is what a forwarder does with the link to Redis.
type linkMode int

const (
	// linkPass forwards both ways.
	linkPass linkMode = iota
	// linkRefuse resets every connection and refuses new ones (nothing
	// listens on the port).
	linkRefuse
	// linkBlackhole accepts connections and forwards nothing: bytes wait,
	// as on a partitioned network, and are delivered when the link
	// returns (late commands reach Redis then, as after a TCP
	// retransmission).
	linkBlackhole
)

// forwarder is a TCP forwarder the test controls, between the clients and
// a Redis. Its address stays the same through every mode.
type forwarder struct {
	t      testing.TB
	target string
	addr   string

	mu     sync.Mutex
	cond   *sync.Cond
	mode   linkMode
	ln     net.Listener
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// startForwarder forwards a free loopback port to target until the test
// ends: one of loopbackPort's, so that it can listen on it again.
func startForwarder(t testing.TB, target string) *forwarder {
	t.Helper()
	port, err := loopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{t: t, target: target, addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]struct{}{}}
	f.cond = sync.NewCond(&f.mu)
	f.wg.Add(1)
	go f.accept(ln)
	t.Cleanup(f.close)
	return f
}

// URL is the redis:// URL of the forwarded Redis.
func (f *forwarder) URL() string { return "redis://" + f.addr + "/0" }

// set switches the link to m.
func (f *forwarder) set(m linkMode) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mode = m
	switch m {
	case linkRefuse:
		if f.ln != nil {
			_ = f.ln.Close()
			f.ln = nil
		}
		f.resetLocked()
	default:
		if f.ln == nil {
			var err error
			for range 50 { // the port was ours a moment ago
				if f.ln, err = net.Listen("tcp", f.addr); err == nil {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err != nil {
				f.t.Errorf("forwarder: listen again on %s: %v", f.addr, err)
				return
			}
			f.wg.Add(1)
			go f.accept(f.ln)
		}
	}
	f.cond.Broadcast()
}

// resetLocked resets every connection (RST, not FIN).
func (f *forwarder) resetLocked() {
	for c := range f.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
	}
	clear(f.conns)
}

func (f *forwarder) close() {
	f.mu.Lock()
	f.closed = true
	if f.ln != nil {
		_ = f.ln.Close()
		f.ln = nil
	}
	f.resetLocked()
	f.cond.Broadcast()
	f.mu.Unlock()
	f.wg.Wait()
}

func (f *forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		_ = c.Close()
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *forwarder) accept(ln net.Listener) {
	defer f.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if !f.track(c) {
			return
		}
		f.wg.Add(1)
		go f.serve(c)
	}
}

func (f *forwarder) serve(c net.Conn) {
	defer f.wg.Done()
	up, err := net.DialTimeout("tcp", f.target, time.Second)
	if err != nil {
		_ = c.Close()
		return
	}
	if !f.track(up) {
		_ = c.Close()
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { f.pipe(up, c) })
	wg.Go(func() { f.pipe(c, up) })
	wg.Wait()
	f.mu.Lock()
	delete(f.conns, c)
	delete(f.conns, up)
	f.mu.Unlock()
}

// pipe copies src to dst, holding every chunk while the link is a black hole.
func (f *forwarder) pipe(dst, src net.Conn) {
	defer func() { _ = dst.Close(); _ = src.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			f.mu.Lock()
			for f.mode == linkBlackhole && !f.closed {
				f.cond.Wait()
			}
			f.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
