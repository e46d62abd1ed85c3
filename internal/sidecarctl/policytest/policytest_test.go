package policytest

import (
	"bytes"
	"errors"
	"testing"

	"github.com/open-policy-agent/opa/v1/cover"
	"github.com/open-policy-agent/opa/v1/tester"
	"github.com/stretchr/testify/assert"

	"github.com/sidecarops/sidecarops/policies"
)

func TestWrite(t *testing.T) {
	pass := &tester.Result{Package: "data.a", Name: "test_pass"}
	fail := &tester.Result{Package: "data.a", Name: "test_fail", Fail: true}
	broken := &tester.Result{Package: "data.b", Name: "test_broken", Error: errors.New("eval_conflict_error")}
	skipped := &tester.Result{Package: "data.b", Name: "todo_test_later", Skip: true}
	coverage := map[string]*cover.FileReport{"b.rego": {CoveredLines: 1, NotCoveredLines: 3}, "a.rego": {CoveredLines: 3, NotCoveredLines: 1}}
	line := "--------------------------------------------------------------------------------\n"
	for _, tc := range []struct {
		name    string
		results []*tester.Result
		opts    Options
		want    string
		fail    string
	}{
		{"all pass, quietly", []*tester.Result{pass, pass}, Options{}, line + "PASS: 2/2\n", ""},
		{"every result when verbose", []*tester.Result{pass}, Options{Verbose: true}, "data.a.test_pass: PASS (0s)\n" + line + "PASS: 1/1\n", ""},
		{"failures and errors always; a skipped test neither passes nor fails",
			[]*tester.Result{pass, fail, broken, skipped}, Options{},
			"data.a.test_fail: FAIL (0s)\ndata.b.test_broken: ERROR (0s)\n  eval_conflict_error\ndata.b.todo_test_later: SKIPPED\n" +
				line + "PASS: 1/4\nFAIL: 2/4\n", "policy tests failed"},
		{"coverage by file, sorted, and in all", []*tester.Result{pass}, Options{Coverage: true, Threshold: 50},
			line + "PASS: 1/1\ncoverage a.rego: 3/4 lines\ncoverage b.rego: 1/4 lines\ncoverage: 50.00%\n", ""},
		{"coverage below the threshold", []*tester.Result{pass}, Options{Coverage: true, Threshold: 50.5},
			line + "PASS: 1/1\ncoverage a.rego: 3/4 lines\ncoverage b.rego: 1/4 lines\ncoverage: 50.00%\n", "coverage 50.00% is below --threshold 50.50%"},
		{"no tests at all fail the run", nil, Options{}, line + "PASS: 0/0\n", "policy tests failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := Write(&out, &policies.TestReport{Results: tc.results, Coverage: coverage}, tc.opts)
			assert.Equal(t, tc.want, out.String())
			if tc.fail == "" {
				assert.NoError(t, err)
			} else {
				assert.EqualError(t, err, tc.fail)
			}
		})
	}
}
