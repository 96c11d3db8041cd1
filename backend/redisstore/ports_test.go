package redisstore_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// portsGiven are the ports loopbackPort has handed out in this process.
var portsGiven sync.Map

// loopbackPort returns a port free on loopback, from below the kernel's
// ephemeral range with its cluster bus port (p+10000) below it too, that
// no other caller in this process was given. The tests that close a
// listener and listen again on its port (a link that refuses, then
// returns) or stop and restart a server on it need such a port: one of the
// ephemeral range, which net.Listen(":0") gives, may meanwhile become the
// local port of any outgoing connection on the machine, and the second
// listen fails with "address already in use".
func loopbackPort() (int, error) {
	lo, hi := 10000, ephemeralLow()-10000
	for range 500 {
		if hi <= lo {
			break
		}
		p := lo + rand.IntN(hi-lo)
		if _, taken := portsGiven.LoadOrStore(p, true); taken {
			continue
		}
		if free(p) && free(p+10000) {
			return p, nil
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	p := ln.Addr().(*net.TCPAddr).Port
	if p+10000 > 65535 {
		return 0, errors.New("no loopback port below the ephemeral range")
	}
	return p, nil
}

// free reports whether port p can be listened on, on loopback.
func free(p int) bool {
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
	if err != nil {
		return false
	}
	_ = ln.Close()
	return true
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// default when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return n
}
