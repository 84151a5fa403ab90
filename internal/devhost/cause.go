package devhost

import (
	"regexp"
	"strings"
)

// netFailure matches a Go network error (net.OpError, net.DNSError) as its text reads at the end
// of a wrapped chain: "dial tcp 127.0.0.1:10000: connect: connection refused", "dial tcp: lookup
// db.example.com on 127.0.0.53:53: no such host", "read tcp 10.0.0.4:51000->10.0.0.5:5432: read:
// connection reset by peer". Group 1 is the address, 2 the name looked up, 3 the failure.
var netFailure = regexp.MustCompile(`\b(?:dial|read|write) (?:tcp|udp)[46]?(?: (?:\S+->)?(\S+?))?: ` +
	`(?:lookup (\S+?)(?: on \S+)?: )?(?:(?:connect|read|write): )?` +
	`(connection refused|connection reset by peer|i/o timeout|no such host|network is unreachable|no route to host|connection timed out|broken pipe)`)

// request matches the HTTP request a *url.Error names (`Get "http://...": `): the URL is long
// (escaped blob names) and says nothing the cause's address does not.
var request = regexp.MustCompile(`\b(?:Get|Head|Post|Put|Patch|Delete) "[^"]*": `)

// The wording in a tick's error of the packages that reach each service: the state store's
// (internal/store/blobstore), the source's (internal/source), and the tick's for a batch the
// handler or sink failed (tick.ErrBatchFailed, or tick.ErrBlocked once it has failed
// {P}_MAX_ATTEMPTS times). TestFailedLineLeadsWithTheCause pins each with
// the package's own error. devhost has only the text: the handler answers a failed tick with it.
const (
	stateStoreWording = "blobstore: "
	sourceWording     = "source: poller "
	batchWording      = "batch failed: "
	blockedWording    = "poller blocked on a poison batch: " // tick.ErrBlocked: the batch's last error
)

// netCause finds a network failure in a failed invocation's error text (one line) and says it
// first: what could not be reached, the failure and its address, e.g. "state store unreachable:
// connection refused (127.0.0.1:10000)". doing is what the tick was doing, the text before the
// request's URL or the failure (empty when nothing precedes them). ok is false when the text
// holds no network failure. status is the invocation's: -1 when devhost's own request to the
// handler failed, so the handler is what could not be reached.
func netCause(text string, status int) (cause, doing string, ok bool) {
	all := netFailure.FindAllStringSubmatchIndex(text, -1)
	if all == nil {
		return "", "", false
	}
	m := all[len(all)-1] // the innermost
	addr := ""
	switch {
	case m[2] >= 0:
		addr = text[m[2]:m[3]]
	case m[4] >= 0:
		addr = text[m[4]:m[5]]
	}
	cause = text[m[6]:m[7]]
	if addr != "" {
		cause += " (" + addr + ")"
	}
	end := m[0]
	if r := request.FindStringIndex(text[:end]); r != nil {
		end = r[0]
	}
	doing = strings.TrimRight(strings.TrimSpace(text[:end]), ":(")
	doing = strings.TrimSpace(doing)
	switch {
	case status < 0:
		cause = "handler unreachable: " + cause
	case strings.Contains(doing, batchWording), strings.Contains(doing, blockedWording):
		cause = "sink unreachable: " + cause
	case strings.Contains(doing, sourceWording):
		cause = "source database unreachable: " + cause
	case strings.Contains(doing, stateStoreWording):
		cause = "state store unreachable: " + cause
	default:
		cause = "unreachable: " + cause
	}
	return cause, doing, true
}
