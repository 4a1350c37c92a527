//go:build linux

package observe_test

import (
	"runtime"
	"testing"

	"github.com/agentexec/agentexec/jobs"
	"github.com/agentexec/agentexec/observe"
	"github.com/agentexec/agentexec/sandbox"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	sandbox.Main()
	jobs.Main()
	goleak.VerifyTestMain(m)
}

func runtimeVersion() string { return runtime.Version() }

func TestTracesWanted(t *testing.T) {
	cases := []struct {
		forced bool
		env    map[string]string
		want   bool
	}{
		{false, nil, false},
		{true, nil, true},
		{false, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, true},
		{false, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, true},
		{false, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, false},
		{true, map[string]string{"OTEL_SDK_DISABLED": " TRUE "}, false},
		{true, map[string]string{"OTEL_SDK_DISABLED": "false"}, true},
	}
	for _, c := range cases {
		if got := observe.TracesWanted(c.forced, func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("forced %v, env %v: %v", c.forced, c.env, got)
		}
	}
}
