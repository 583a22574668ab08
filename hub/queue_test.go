package hub

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCellList(t *testing.T) {
	for _, c := range []struct {
		cells []int
		want  string
	}{
		{[]int{4}, "cell 4"},
		{[]int{3, 4}, "cells 3-4"},
		{[]int{3, 5}, "cells 3, 5"},
		{[]int{1, 2, 3, 7, 9, 10}, "cells 1-3, 7, 9-10"},
	} {
		assert.Equal(t, c.want, cellList(c.cells), "%v", c.cells)
	}
}
