package worker

// Signals are the loop passes a test can wait for (testSignals): each
// func, when set, is called after such a pass. Set before Run.
type Signals struct {
	Claimed, Rescued, Dropped, Cleaned func()
}

// SetSignals tells s of w's passes (tests only).
func SetSignals(w *Worker, s Signals) {
	w.signals = testSignals{claimed: s.Claimed, rescued: s.Rescued, dropped: s.Dropped, cleaned: s.Cleaned}
}
