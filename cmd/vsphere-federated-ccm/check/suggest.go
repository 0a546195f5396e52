package check

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// suggest names up to three of names nearest to want (by edit distance,
// case-insensitively), as "; nearest: a, b"; with none near, the first
// few names.
func suggest(want string, names []string) string {
	type scored struct {
		name string
		d    int
	}
	var s []scored
	for _, n := range names {
		d := editDistance(strings.ToLower(want), strings.ToLower(n))
		if d <= max(3, len(want)/2) {
			s = append(s, scored{n, d})
		}
	}
	if len(s) == 0 {
		if len(names) == 0 {
			return " (there are none)"
		}
		return fmt.Sprintf(" (there are: %s)", strings.Join(names[:min(len(names), 5)], ", "))
	}
	slices.SortStableFunc(s, func(a, b scored) int { return cmp.Compare(a.d, b.d) })
	var out []string
	for _, x := range s[:min(len(s), 3)] {
		out = append(out, strconv.Quote(x.name))
	}
	return "; nearest: " + strings.Join(out, ", ")
}

// editDistance is Levenshtein's, over bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
