package generator

import (
	"strconv"
	"time"
)

// Executions are the execution settings of every generated workflow: what
// n8n keeps of an execution, which may hold the webhook's body and so
// personal data, and how long one may run. The zero value of each field
// keeps the n8n instance's own setting, except that the inbox pattern's
// receiver keeps no data of its successful executions (the body is in
// inbox_events already).
//
// idemhook verify reads execution data; it saves every execution of the
// workflow it deploys into its scratch n8n, whatever these say. Deployed
// with "none", a workflow's executions are still counted and listed by n8n
// when they fail (SaveErrors), and the guard's own tables (processed_events,
// inbox_events) keep what each delivery did.
type Executions struct {
	// SaveSuccess and SaveErrors are SaveAll or SaveNone
	// (saveDataSuccessExecution, saveDataErrorExecution).
	SaveSuccess, SaveErrors string
	// SaveManual is "true" or "false": keep the data of runs started from
	// the editor (saveManualExecutions).
	SaveManual string
	// Timeout stops an execution after it, in whole seconds
	// (executionTimeout).
	Timeout time.Duration
}

// Values of Executions.SaveSuccess and SaveErrors.
const (
	SaveAll  = "all"
	SaveNone = "none"
)

func (x Executions) settings() map[string]any {
	s := map[string]any{"executionOrder": "v1"}
	if x.SaveSuccess != "" {
		s["saveDataSuccessExecution"] = x.SaveSuccess
	}
	if x.SaveErrors != "" {
		s["saveDataErrorExecution"] = x.SaveErrors
	}
	if x.SaveManual != "" {
		s["saveManualExecutions"] = x.SaveManual == "true"
	}
	if x.Timeout > 0 {
		s["executionTimeout"] = int64(x.Timeout / time.Second)
	}
	return s
}

// check returns the *OptionError of the first invalid field.
func (x Executions) check() error {
	for _, f := range []struct{ option, value string }{{"save success", x.SaveSuccess}, {"save errors", x.SaveErrors}} {
		if f.value != "" && f.value != SaveAll && f.value != SaveNone {
			return &OptionError{Option: f.option, Value: f.value, Reason: "use all or none"}
		}
	}
	if x.SaveManual != "" {
		if _, err := strconv.ParseBool(x.SaveManual); err != nil || (x.SaveManual != "true" && x.SaveManual != "false") {
			return &OptionError{Option: "save manual", Value: x.SaveManual, Reason: "use true or false"}
		}
	}
	if x.Timeout < 0 || x.Timeout > 24*time.Hour || x.Timeout%time.Second != 0 {
		return &OptionError{Option: "execution timeout", Value: x.Timeout.String(), Reason: "must be between 1s and 24h, in whole seconds"}
	}
	return nil
}
