//go:build !race

package keysvc_test

const raceEnabled = false
