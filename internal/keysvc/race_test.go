//go:build race

package keysvc_test

// raceEnabled: under the race detector sync.Pool drops items at random, so
// counting what a recycled buffer saves means nothing.
const raceEnabled = true
