package handler

import (
	"context"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/pseudotrigger/pseudotrigger/internal/pollerstatus"
	"github.com/pseudotrigger/pseudotrigger/internal/redact"
	"github.com/pseudotrigger/pseudotrigger/internal/state"
)

// StatusRoute is where the `status` function's requests reach the handler.
//
// status/function.json is an httpTrigger in (authLevel function, GET, route "status") and an
// http out, nothing else, and host.json sets customHandler.enableProxyingHttpRequest and
// enableForwardingHttpRequest. For such a function, and only for such a function, the host
// proxies (or, before the proxying came, forwards) the original request to the handler
// at the original path, /api/status (routePrefix "api"), query string and headers included, and
// returns the handler's response to the caller as it is: status, headers, body. The function key
// is checked by the host before it forwards anything. Source: the Functions host,
// src/WebJobs.Script/Workers/Http/DefaultHttpWorkerService.cs: InvokeAsync takes the forwarding
// path only when FunctionMetadata.IsHttpInAndOutFunction() (exactly one input binding, of type
// httpTrigger, and one output binding, of type http: FunctionMetadataExtensions.cs) and
// EnableForwardingHttpRequest is set; GetPathValue then uses the request's AbsolutePath instead
// of the function name, and the HttpResponseMessage becomes the http output. Every other function
// (the pollers' timers) keeps ProcessDefaultInvocationRequest: the invocation JSON POSTed to
// /{FunctionName}, as before.
//
// Forwarding rather than the invocation JSON (Data.req in, Outputs.res{statusCode, body,
// headers} out) because content negotiation needs the caller's Accept header as a header, the
// reply is an HTML page or JSON with its own Content-Type and security headers, which the
// host passes through untouched, and the route is an ordinary GET that tests, a browser and
// headless Chromium can load directly. Hosts since Azure/azure-functions-host PR 11035 (2025)
// read customHandler.enableProxyingHttpRequest first (HttpWorkerOptions.cs and
// DefaultHttpWorkerService.InvokeAsync at 555c0fae: "if (EnableProxyingHttpRequest) return
// ProxyInvocationRequest"): the same request to the same path, through YARP, streamed; it is the
// setting Microsoft's custom handler documentation now gives. Older v4 hosts do not know it and
// forward (enableForwardingHttpRequest, "the legacy setting" in that file): both are set, and
// either way the handler sees GET /api/status.
const StatusRoute = "/api/status"

// statusTimeout bounds the reads of one status request.
const statusTimeout = 30 * time.Second

// status answers GET /api/status: every poller's row, as JSON, or as a page when the caller
// prefers HTML (a browser). It only reads the state store.
func (a *App) status(w http.ResponseWriter, r *http.Request) {
	asHTML := prefersHTML(r)
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Vary", "Accept")
	h.Set("X-Content-Type-Options", "nosniff")
	// The page's URL carries the function key (?code=): never send it anywhere as a Referer.
	h.Set("Referrer-Policy", "no-referrer")
	fail := func(code int, msg string) {
		a.log.Error("status", "error", msg)
		if asHTML {
			writePage(w, code, pollerstatus.ErrorPage(a.appName, msg, a.clock.Now()))
			return
		}
		writeJSON(w, code, map[string]any{"error": msg})
	}
	if a.storeErr != nil {
		fail(http.StatusServiceUnavailable, "state store: "+redact.Text(a.storeErr.Error()))
		return
	}
	rd, ok := a.store.(pollerstatus.Reader)
	if !ok {
		fail(http.StatusInternalServerError, "the state store cannot list blobs")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), statusTimeout)
	defer cancel()
	rep, err := pollerstatus.NewReport(ctx, rd, a.statusConfig())
	if err != nil {
		fail(http.StatusServiceUnavailable, "state store: "+redact.Text(err.Error()))
		return
	}
	if !asHTML {
		writeJSON(w, http.StatusOK, rep)
		return
	}
	d := pollerstatus.NewPage(rep)
	d.History = historyURL(a.getenv)
	writePage(w, http.StatusOK, d)
}

// historyURL is the app setting STATUS_WORKBOOK_URL (the deployment's workbook in the Azure
// portal, infra/bicep/modules/workbook.bicep) when it is an https URL; "" otherwise.
func historyURL(getenv func(string) string) string {
	u := strings.TrimSpace(getenv("STATUS_WORKBOOK_URL"))
	if !strings.HasPrefix(u, "https://") {
		return ""
	}
	return u
}

func (a *App) statusConfig() pollerstatus.Config {
	cfg := pollerstatus.Config{App: a.appName, Now: a.clock.Now}
	if !a.noProbe {
		cfg.Probe = a.probe
	}
	for _, ps := range a.pollers {
		cfg.Registered = append(cfg.Registered, pollerstatus.RegisteredFrom(ps.def, ps.settings, ps.err))
	}
	return cfg
}

// probe looks at a poller's source live, with the app's own settings, through the source its
// ticks use (opened now if no tick has opened it yet).
func (a *App) probe(ctx context.Context, name string, doc *state.Doc) pollerstatus.Probe {
	return pollerstatus.OpenAndProbe(ctx, doc, a.clock.Now, func(ctx context.Context) (pollerstatus.Source, string, func(), error) {
		r, err := a.runner(ctx, a.pollers[name])
		if err != nil {
			return nil, "", nil, err
		}
		inUse, release := r.InUse()
		src, ok := inUse.(pollerstatus.Source)
		if !ok {
			release()
			return nil, "", nil, pollerstatus.Skip("this poller's source cannot be probed")
		}
		return src, r.Lease.Config().Blob, release, nil
	})
}

// prefersHTML reports whether the request's Accept header ranks text/html (or XHTML) above
// application/json, as a browser's does. A tie (*/*, curl's default), no Accept and anything
// unparsable are JSON. ?format=html or ?format=json overrides it.
func prefersHTML(r *http.Request) bool {
	switch r.URL.Query().Get("format") {
	case "html":
		return true
	case "json":
		return false
	}
	accept := r.Header.Values("Accept")
	if len(accept) == 0 {
		return false
	}
	ranges := parseAccept(strings.Join(accept, ","))
	return max(quality(ranges, "text/html"), quality(ranges, "application/xhtml+xml")) > quality(ranges, "application/json")
}

type mediaRange struct {
	typ, sub string
	q        float64
}

func parseAccept(header string) []mediaRange {
	var out []mediaRange
	for part := range strings.SplitSeq(header, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		typ, sub, ok := strings.Cut(mt, "/")
		if !ok {
			continue
		}
		q := 1.0
		if v, ok := params["q"]; ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 && f <= 1 {
				q = f
			} else {
				q = 0
			}
		}
		out = append(out, mediaRange{typ, sub, q})
	}
	return out
}

// quality is the q the most specific matching range gives mediaType (RFC 9110 §12.5.1): an exact
// match over type/*, over */*; 0 when none matches.
func quality(ranges []mediaRange, mediaType string) float64 {
	typ, sub, _ := strings.Cut(mediaType, "/")
	best, specificity := 0.0, -1
	for _, m := range ranges {
		s := -1
		switch {
		case m.typ == typ && m.sub == sub:
			s = 2
		case m.typ == typ && m.sub == "*":
			s = 1
		case m.typ == "*" && m.sub == "*":
			s = 0
		}
		if s > specificity || (s == specificity && s >= 0 && m.q > best) {
			best, specificity = m.q, s
		}
	}
	return best
}

// writePage answers with the status page (pollerstatus renders it) and its security headers.
func writePage(w http.ResponseWriter, code int, d pollerstatus.PageData) {
	var b strings.Builder
	if err := pollerstatus.RenderPage(&b, d); err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": "rendering the status page: " + err.Error()})
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	// Self-contained: inline CSS and SVG, no script, nothing loaded from anywhere.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(b.String()))
}
