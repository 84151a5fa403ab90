//go:build !faultpoints

package faultpoint

import "time"

// Enabled tells whether fault points are compiled in.
const Enabled = false

// Hit marks a fault point; without the faultpoints tag it does nothing.
func Hit(Point) {}

// ClockOffset is the configured skew of the wall clock; always 0 without the faultpoints tag.
func ClockOffset() (time.Duration, error) { return 0, nil }
