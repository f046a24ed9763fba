package planner

import "time"

// startTime is the Last-Modified of the embedded files: they change only
// with the binary.
var startTime = time.Now()
