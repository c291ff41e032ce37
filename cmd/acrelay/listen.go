package main

import (
	"fmt"
	"net"
)

// listen binds one of serve's listeners. Every listener is bound before
// serve starts anything, and one that cannot bind ends serve with an
// error naming the flag, its environment variable and the address: a
// relay never runs with a listener missing (issue 25: the appservice
// listener used to log and go on, leaving the relay deaf to Matrix).
func listen(flag, env, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s (%s) %s: cannot listen: %w", flag, env, addr, err)
	}
	return ln, nil
}
