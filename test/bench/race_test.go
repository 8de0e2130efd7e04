//go:build race

package bench

// raceEnabled: the race detector allocates, so allocation budgets are not
// checked under it.
const raceEnabled = true
