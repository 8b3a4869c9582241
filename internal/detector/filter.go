package detector

import "sync/atomic"

// slotCount is the number of slots of a filter.
const slotCount = 4096

// filters are what a read looks at before the table: how many recorded
// writes hash to each slot, by key (for GetByKey, which has it) and by
// name (for reads that have the object). 16 KiB, made at the first write.
type filters struct{ byKey, byName filter }

// filter holds a 16-bit counter per slot, two to a word (a slot counts at
// most MaxEntries writes), read without a lock.
type filter [slotCount / 2]atomic.Uint32

// add adds delta (1 or -1) to the slot of hash h.
func (f *filter) add(h uint64, delta int32) {
	i := h % slotCount
	f[i/2].Add(uint32(delta) << (16 * (i % 2))) // -1 wraps to a borrow-free decrement of that half
}

// has reports whether the slot of hash h counts a write.
func (f *filter) has(h uint64) bool {
	i := h % slotCount
	return f[i/2].Load()>>(16*(i%2))&0xffff != 0
}
