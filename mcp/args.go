package mcp

import (
	"math"
	"strconv"
)

// Int is an integer argument. One beyond int's range (max_output: 1e20)
// is taken as the farthest int on its side, so that the tool's own range
// check refuses it in its words, where the JSON decoder's ("cannot
// unmarshal number ... overflows ... of type int") came. The arguments'
// schema has checked that it is an integer.
type Int int

// UnmarshalJSON reads a JSON number into n, clamped to int's range.
func (n *Int) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == "null" {
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !isRange(err) {
		return err
	}
	switch {
	case f >= math.MaxInt:
		*n = math.MaxInt
	case f <= math.MinInt:
		*n = math.MinInt
	default:
		*n = Int(f)
	}
	return nil
}

// isRange reports whether err is ParseFloat's out of range (its value
// then ±Inf).
func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}
