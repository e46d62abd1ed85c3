package engine

import (
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// smallCacheEntries is how many rule and function results a smallCache holds before it hands them
// to OPA's own cache. A pod's match decision caches three or four; a large fleet's collision check
// can cache one per SidecarSet, where a list would be searched quadratically.
const smallCacheEntries = 16

// smallCache is a topdown.VirtualCache for evaluations that cache a few results, as a list. OPA's
// own cache is a trie with a hash map per reference segment: for the match decision it was a
// large share of the evaluation's allocations (BenchmarkDecide). Past smallCacheEntries the
// entries move into OPA's cache, which then serves every call. It has the same semantics: only
// the top frame is read or written, an entry marked undefined stays undefined, and Keys lists the
// top frame's defined entries.
type smallCache struct {
	entries []cacheEntry
	frames  []int // where each frame's entries start; the last is the top
	big     topdown.VirtualCache
	// refs holds the terms of the entries' refs, a few entries' in refs0 without an allocation of
	// their own: a copy of each ref was a large share of the cache's allocations.
	refs   []*ast.Term
	inline [4]cacheEntry
	frame0 [2]int
	refs0  [16]*ast.Term
}

type cacheEntry struct {
	ref       ast.Ref
	value     *ast.Term
	undefined bool
}

// reset empties the cache for another evaluation, and lets go of what it held.
func (c *smallCache) reset() {
	clear(c.inline[:])
	clear(c.refs0[:])
	c.entries, c.frames, c.refs, c.big = c.inline[:0], append(c.frame0[:0], 0), c.refs0[:0], nil
}

var _ topdown.VirtualCache = (*smallCache)(nil)

func (c *smallCache) Push() {
	if c.big != nil {
		c.big.Push()
		return
	}
	c.frames = append(c.frames, len(c.entries))
}

func (c *smallCache) Pop() {
	if c.big != nil {
		c.big.Pop()
		return
	}
	// The evaluator pairs every Pop with a Push (a with statement): the first frame stays.
	top := c.frames[len(c.frames)-1]
	c.entries, c.frames = c.entries[:top], c.frames[:len(c.frames)-1]
}

// find is the index of ref in the top frame, or -1.
func (c *smallCache) find(ref ast.Ref) int {
	for i := c.frames[len(c.frames)-1]; i < len(c.entries); i++ {
		if c.entries[i].ref.Equal(ref) {
			return i
		}
	}
	return -1
}

func (c *smallCache) Get(ref ast.Ref) (*ast.Term, bool) {
	if c.big != nil {
		return c.big.Get(ref)
	}
	i := c.find(ref)
	switch {
	case i < 0:
		return nil, false
	case c.entries[i].undefined:
		return nil, true
	}
	return c.entries[i].value, false
}

func (c *smallCache) Put(ref ast.Ref, value *ast.Term) {
	if c.big != nil {
		c.big.Put(ref, value)
		return
	}
	i := c.find(ref)
	if i < 0 {
		if len(c.entries) == smallCacheEntries {
			c.grow()
			c.big.Put(ref, value)
			return
		}
		// The evaluator reuses the slice it passes: the entry keeps a copy of its terms. When refs
		// is full, append moves it to a new array; the entries made before keep the old one, which
		// nothing writes again.
		start := len(c.refs)
		c.refs = append(c.refs, ref...)
		c.entries = append(c.entries, cacheEntry{ref: c.refs[start:len(c.refs):len(c.refs)]})
		i = len(c.entries) - 1
	}
	if value != nil {
		c.entries[i].value = value
	} else {
		c.entries[i].undefined = true
	}
}

func (c *smallCache) Keys() []ast.Ref {
	if c.big != nil {
		return c.big.Keys()
	}
	var keys []ast.Ref
	for _, e := range c.entries[c.frames[len(c.frames)-1]:] {
		if e.value != nil {
			keys = append(keys, e.ref)
		}
	}
	return keys
}

// grow moves every frame into OPA's cache, which serves the rest of the evaluation.
func (c *smallCache) grow() {
	big := topdown.NewVirtualCache()
	for f, start := range c.frames {
		if f > 0 {
			big.Push()
		}
		end := len(c.entries)
		if f+1 < len(c.frames) {
			end = c.frames[f+1]
		}
		for _, e := range c.entries[start:end] {
			if e.value != nil {
				big.Put(e.ref, e.value)
			}
			if e.undefined {
				big.Put(e.ref, nil)
			}
		}
	}
	c.big, c.entries, c.frames, c.refs = big, nil, nil, nil
}
