package discovery

import (
	"fmt"
	"testing"
	"time"
)

func TestLocationCacheServesWithinTTL(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newLocationCache(time.Minute)
	c.now = func() time.Time { return now }
	loc := location{vcenter: "vc1"}
	c.set("a", loc)
	if got, ok := c.get("a"); !ok || got != loc {
		t.Fatalf("get(a) = %v, %v", got, ok)
	}
	now = now.Add(59 * time.Second)
	if _, ok := c.get("a"); !ok {
		t.Fatal("entry expired early")
	}
	now = now.Add(time.Second)
	if _, ok := c.get("a"); ok {
		t.Fatal("entry served after its TTL")
	}
	c.set("b", loc)
	c.forget("b")
	if _, ok := c.get("b"); ok {
		t.Fatal("forgotten entry served")
	}
}

// Refreshing one key costs one entry; expired keys are swept as the map
// grows, so it stays bounded by what was set within one TTL.
func TestLocationCacheStaysBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newLocationCache(time.Second)
	c.now = func() time.Time { return now }
	for range 10000 {
		c.set("retired", location{vcenter: "gone"})
		now = now.Add(time.Millisecond)
	}
	if n := c.size(); n != 1 {
		t.Fatalf("%d entries after refreshing one key, want 1", n)
	}
	for i := range 10000 {
		c.set(fmt.Sprint(i), location{vcenter: "vc1"})
		now = now.Add(10 * time.Millisecond) // about 100 live at a time
	}
	if n := c.size(); n > 400 {
		t.Fatalf("%d entries, want it bounded near 100 live ones", n)
	}
}
