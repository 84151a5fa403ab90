// Package devhost stands in for the Azure Functions host on a developer's machine. It reads
// local.settings.json and every */function.json, starts the custom handler with those settings,
// and POSTs the host's timer invocation to /{function} on each NCRONTAB schedule. It can also
// keep writing rows to the example's SQLite orders table, and prints one line of progress per
// tick. scripts/dev.sh runs it when Azure Functions Core Tools (func) is not installed.
package devhost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/appsettings"
)

// Function is a timer function found in a */function.json.
type Function struct {
	Name     string // the folder name
	Binding  string // the timer binding's name
	Schedule string // resolved NCRONTAB expression
	// Err says why the function has no timer (its schedule setting is missing or is not
	// NCRONTAB): the Functions host leaves that function out and runs the others, and so does
	// devhost.
	Err error
}

// ErrNoSchedule: a function's schedule names a setting that is not set.
var ErrNoSchedule = errors.New("no schedule")

// LoadSettings reads the Values of local.settings.json.
func LoadSettings(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w (copy local.settings.json.example to local.settings.json)", err)
	}
	var f struct {
		Values map[string]string `json:"Values"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f.Values, nil
}

var setting = regexp.MustCompile(`^%([^%]+)%$`)

// Functions finds the timer functions under root and resolves %SETTING% schedules from values. A
// function whose schedule cannot be resolved or parsed is returned with Err set (naming the
// setting), so that the caller runs the others; err is for a function.json that cannot be read.
func Functions(root string, values map[string]string) ([]Function, error) {
	paths, err := filepath.Glob(filepath.Join(root, "*", "function.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var fns []Function
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var fj struct {
			Bindings []struct {
				Type     string `json:"type"`
				Name     string `json:"name"`
				Schedule string `json:"schedule"`
			} `json:"bindings"`
		}
		if err := json.Unmarshal(data, &fj); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		for _, b := range fj.Bindings {
			if b.Type != "timerTrigger" {
				continue
			}
			fn := Function{Name: filepath.Base(filepath.Dir(p)), Binding: b.Name, Schedule: b.Schedule}
			rel := filepath.ToSlash(filepath.Join(fn.Name, "function.json"))
			if m := setting.FindStringSubmatch(fn.Schedule); m != nil {
				v, ok := values[m[1]]
				if !ok || strings.TrimSpace(v) == "" {
					fn.Err = fmt.Errorf("%w: %s's schedule is %%%s%%, and %s is not set (in local.settings.json or the environment): set it, e.g. \"%s\": \"*/5 * * * * *\"",
						ErrNoSchedule, rel, m[1], m[1], m[1])
				}
				fn.Schedule = v
			}
			if fn.Err == nil {
				if _, err := appsettings.ParseSchedule(fn.Schedule); err != nil {
					fn.Err = fmt.Errorf("%s: schedule %q: %w", rel, fn.Schedule, err)
				}
			}
			fns = append(fns, fn)
		}
	}
	return fns, nil
}

// Payload is the host's invocation body for a timer.
func Payload(fn Function, last, next, now time.Time, pastDue bool) []byte {
	status := map[string]any{"Last": last.Format(time.RFC3339Nano), "Next": next.Format(time.RFC3339Nano), "LastUpdated": now.Format(time.RFC3339Nano)}
	if last.IsZero() {
		status["Last"] = "0001-01-01T00:00:00"
	}
	body, _ := json.Marshal(map[string]any{
		"Data": map[string]any{fn.Binding: map[string]any{
			"Schedule":       map[string]any{"AdjustForDST": true},
			"ScheduleStatus": status,
			"IsPastDue":      pastDue,
		}},
		"Metadata": map[string]any{"sys": map[string]any{"MethodName": fn.Name, "UtcNow": now.UTC().Format(time.RFC3339Nano), "RandGuid": fmt.Sprintf("%x", now.UnixNano())}},
	})
	return body
}

// Result is what one invocation answered.
type Result struct {
	Status  int
	Summary map[string]any // ReturnValue on success
	Error   string
}

// Invoke POSTs one timer invocation to the handler.
func Invoke(ctx context.Context, base string, fn Function, body []byte) Result {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/"+fn.Name, bytes.NewReader(body))
	if err != nil {
		return Result{Status: -1, Error: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Azure-Functions-InvocationId", fmt.Sprintf("dev-%d", time.Now().UnixNano()))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Result{Status: -1, Error: err.Error()}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var r struct {
		ReturnValue map[string]any `json:"ReturnValue"`
		Error       string         `json:"error"`
	}
	_ = json.Unmarshal(raw, &r)
	if resp.StatusCode != http.StatusOK && r.Error == "" {
		r.Error = strings.TrimSpace(string(raw))
	}
	return Result{Status: resp.StatusCode, Summary: r.ReturnValue, Error: r.Error}
}

// FailedReasonMax is how much of a failed tick's error a progress line shows.
const FailedReasonMax = 160

// FailedLine is the progress line of a failed invocation: one line, and where the full text is
// (the handler's log). When the error ends in a network failure (a dial refused, a name not
// found, a timeout), the line leads with it and what could not be reached (netCause), then says
// what the tick was doing, without the request's URL; otherwise it is the reason's first line.
// Either way it is shortened to FailedReasonMax characters; the cause is never cut.
func FailedLine(stamp, name string, r Result, logPath string) string {
	first, _, multi := strings.Cut(strings.TrimSpace(r.Error), "\n")
	first = strings.Join(strings.Fields(first), " ")
	reason := first
	if cause, doing, ok := netCause(first, r.Status); ok {
		reason = cause
		if doing != "" {
			reason += " - " + shorten(doing, FailedReasonMax-len([]rune(cause))-3, &multi)
		}
		multi = true // the request it made is in the log
	} else {
		reason = shorten(reason, FailedReasonMax, &multi)
	}
	if reason == "" {
		reason = "no error text"
	}
	line := fmt.Sprintf("%s %-12s FAILED (%d): %s", stamp, name, r.Status, reason)
	if multi {
		line += " (the full error: " + logPath + ")"
	}
	return line
}

// shorten cuts s to limit characters (at least 20), ending it with "…", and sets cut when it
// does.
func shorten(s string, limit int, cut *bool) string {
	limit = max(limit, 20)
	if runes := []rune(s); len(runes) > limit {
		*cut = true
		return string(runes[:limit-1]) + "…"
	}
	return s
}
