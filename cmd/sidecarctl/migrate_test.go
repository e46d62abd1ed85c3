package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMigratePageSizeMustBePositive(t *testing.T) {
	_, errOut, code := sidecarctl(t, "", "migrate", "check", "--page-size", "0")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "--page-size 0: must be positive")
}
