package cache

import (
	"fmt"
	"testing"
	"time"
)

func TestTTL(t *testing.T) {
	now := time.Unix(1000, 0)
	c := NewTTL[string, int](time.Minute)
	c.now = func() time.Time { return now }
	c.Set("a", 1)
	if v, ok := c.Get("a"); !ok || v != 1 {
		t.Fatalf("Get(a) = %v, %v", v, ok)
	}
	now = now.Add(59 * time.Second)
	if _, ok := c.Get("a"); !ok {
		t.Fatal("entry expired early")
	}
	now = now.Add(time.Second)
	if _, ok := c.Get("a"); ok {
		t.Fatal("entry served after its ttl")
	}
	c.Set("b", 2)
	c.Delete("b")
	if _, ok := c.Get("b"); ok {
		t.Fatal("deleted entry served")
	}
}

// Expired entries are swept as the map grows, so it stays bounded by what
// was set within one ttl.
func TestTTLSweeps(t *testing.T) {
	now := time.Unix(1000, 0)
	c := NewTTL[string, int](time.Second)
	c.now = func() time.Time { return now }
	for i := range 10000 {
		c.Set(fmt.Sprint(i), i)
		now = now.Add(10 * time.Millisecond) // about 100 live at a time
	}
	if n := c.Len(); n > 400 {
		t.Fatalf("cache holds %d entries, want it bounded near 100 live ones", n)
	}
}
