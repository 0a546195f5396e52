//go:build race

package cloud_test

// raceDetector: the race detector slows every goroutine 2-20x, unevenly:
// a test that measures time against a network round trip or a baseline
// measures the detector instead.
const raceDetector = true
