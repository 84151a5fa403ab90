package blobstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"
)

// ErrUnreachable: nothing accepts connections at the state store's address (Azurite not
// started, a wrong port or host, or no network path to the storage account).
var ErrUnreachable = errors.New("state store not reachable")

// UnreachableError says which setting names the address that refused or did not answer.
type UnreachableError struct {
	Setting string // e.g. StateStorage
	Address string // host:port
	Account string // the storage account's name (devstoreaccount1 for Azurite)
	Err     error  // the dial's error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("%s: cannot connect to %s (%v)", e.Setting, e.Address, e.Err)
}

// Unwrap makes errors.Is(err, ErrUnreachable) true.
func (e *UnreachableError) Unwrap() []error { return []error{ErrUnreachable, e.Err} }

// Local reports whether the address is this machine's (Azurite, the emulator).
func (e *UnreachableError) Local() bool {
	host, _, err := net.SplitHostPort(e.Address)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ReachTimeout bounds Reachable's one connection attempt.
const ReachTimeout = 3 * time.Second

// Reachable opens one TCP connection to the store's endpoint, without the SDK's retries (a
// refused connection is otherwise retried for seconds and reported as a long request error), and
// returns an *UnreachableError when nothing accepts it within ReachTimeout.
func (s *Store) Reachable(ctx context.Context) error {
	u, err := url.Parse(s.c.URL())
	if err != nil {
		return fmt.Errorf("blobstore: the container URL: %w", err)
	}
	addr := u.Host
	if u.Port() == "" {
		port := "443"
		if u.Scheme == "http" {
			port = "80"
		}
		addr = net.JoinHostPort(u.Hostname(), port)
	}
	ctx, cancel := context.WithTimeout(ctx, ReachTimeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return &UnreachableError{Setting: s.setting, Address: addr, Account: s.account, Err: err}
	}
	return conn.Close()
}
