//go:build !race

package cloud_test

const raceDetector = false
