package flux

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// maxRank bounds the ranks an idset may name, and maxIDs how many it may hold: a Flux instance
// planned by fluxfed has at most 65536 ranks (bursting.MaxHosts), and a hostile or corrupt line
// must not make the hub allocate more.
const (
	maxRank = 1 << 20
	maxIDs  = 1 << 16
)

// ParseIDSet parses an RFC 22 idset as flux prints ranks: "3", "0-1", "[0-2,5,7-9]". The empty
// string is the empty set. The result is sorted and has no duplicates.
func ParseIDSet(s string) ([]int, error) {
	inner := s
	if strings.HasPrefix(s, "[") {
		if !strings.HasSuffix(s, "]") || len(s) < 2 {
			return nil, fmt.Errorf("idset %q: unbalanced brackets", s)
		}
		inner = s[1 : len(s)-1]
	}
	if inner == "" {
		if s != "" && s != "[]" {
			return nil, fmt.Errorf("idset %q is empty inside its brackets", s)
		}
		return nil, nil
	}
	var ids []int
	for part := range strings.SplitSeq(inner, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := parseID(s, lo)
		if err != nil {
			return nil, err
		}
		last := first
		if isRange {
			if last, err = parseID(s, hi); err != nil {
				return nil, err
			}
			if last < first {
				return nil, fmt.Errorf("idset %q: range %s goes down", s, part)
			}
		}
		if len(ids)+last-first+1 > maxIDs {
			return nil, fmt.Errorf("idset %q holds more than %d ids", s, maxIDs)
		}
		for id := first; id <= last; id++ {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// parseID parses one id of idset s.
func parseID(s, id string) (int, error) {
	if id == "" || strings.TrimLeft(id, "0123456789") != "" {
		return 0, fmt.Errorf("idset %q: %q is not a rank", s, id)
	}
	n, err := strconv.Atoi(id)
	if err != nil || n > maxRank {
		return 0, fmt.Errorf("idset %q: rank %s is out of range (at most %d)", s, id, maxRank)
	}
	return n, nil
}

// FormatIDSet writes ids as flux writes ranks: ranges joined by commas ("3", "0-2", "0-2,5"),
// and with brackets, as flux jobs writes them, when there is more than one number ("[0-2]").
// ids must be sorted without duplicates.
func FormatIDSet(ids []int, brackets bool) string {
	var parts []string
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, strconv.Itoa(ids[i]))
		} else {
			parts = append(parts, strconv.Itoa(ids[i])+"-"+strconv.Itoa(ids[j]))
		}
		i = j + 1
	}
	s := strings.Join(parts, ",")
	if brackets && len(ids) > 1 {
		s = "[" + s + "]"
	}
	return s
}
