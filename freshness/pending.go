package freshness

// LowestWaited returns the lowest target a caller is blocked on in Wait,
// and false when none is (targets held only by AfterFunc callbacks do not
// count). It costs O(pending targets); it is meant for occasional checks,
// such as deciding whether probing the server can release anyone.
func (t *Tracker) LowestWaited() (RV, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var low RV
	found := false
	for _, w := range t.targets {
		if w.waiters > 0 && (!found || w.rv.Compare(low) < 0) {
			low, found = w.rv, true
		}
	}
	return low, found
}
