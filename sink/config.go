package sink

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Config defines a sink: poller.json's "sink" object, field for field (poller.schema.json
// describes the same fields for editors). Values of URL and Headers may name app settings as
// %NAME%, resolved by Setup, so that secrets stay in app settings (Key Vault references).
type Config struct {
	// Type is webhook, storagequeue, servicebus, eventhubs or eventgrid.
	Type string `json:"type"`
	// Connection names the connection's app settings, as a Functions binding's connection does:
	// X (a connection string) or X__queueServiceUri / X__fullyQualifiedNamespace /
	// X__topicEndpointUri (identity based) with X__clientId or X__credential. Not for webhook.
	Connection string `json:"connection,omitempty"`
	// Mode is row (a message per row, the default) or batch (a message per batch).
	Mode string `json:"mode,omitempty"`
	// Concurrency bounds the requests in flight for one batch (default 16): webhook rows,
	// storage queue messages, Event Hubs partition keys, Service Bus sessions.
	Concurrency int `json:"concurrency,omitempty"`

	// URL is the webhook's http(s) URL (webhook).
	URL string `json:"url,omitempty"`
	// Headers are added to each webhook request (webhook).
	Headers map[string]string `json:"headers,omitempty"`
	// Timeout bounds one webhook request, as a Go duration (default 30s) (webhook).
	Timeout string `json:"timeout,omitempty"`
	// SigningSecret is %SETTING%, the app setting (a Key Vault reference in Azure) holding the
	// Standard Webhooks signing secrets, "whsec_" + base64, several separated by spaces during a
	// rotation: each request then carries webhook-id, webhook-timestamp and webhook-signature
	// (docs/webhooks.md) (webhook).
	SigningSecret string `json:"signing_secret,omitempty"`
	// Auth sends an Entra ID access token from the app's identity with each request (webhook).
	Auth *WebhookAuth `json:"auth,omitempty"`

	// Queue is the storage queue or Service Bus queue (storagequeue, servicebus).
	Queue string `json:"queue,omitempty"`
	// Encoding is base64 (the default, what the Functions queue trigger expects) or text
	// (storagequeue).
	Encoding string `json:"encoding,omitempty"`
	// MessageTTL is how long a queue message lives: a Go duration, or "never" (the default: a
	// change nobody has read yet is not dropped) (storagequeue).
	MessageTTL string `json:"message_ttl,omitempty"`

	// Topic is the Service Bus topic (servicebus; instead of Queue).
	Topic string `json:"topic,omitempty"`
	// Sessions sets each message's SessionID to the row's key, for a session-enabled queue or
	// subscription that hands each key's changes to one consumer in order (servicebus).
	Sessions bool `json:"sessions,omitempty"`

	// Hub is the event hub (eventhubs). Each event's partition key is the row's key.
	Hub string `json:"hub,omitempty"`

	// EventSource and EventType override the CloudEvents source (default /pseudotrigger/{poller})
	// and type (default pseudotrigger.row.{op}) (eventgrid).
	EventSource string `json:"event_source,omitempty"`
	EventType   string `json:"event_type,omitempty"`
}

// WebhookAuth is a webhook's Entra ID token: each request carries Authorization: Bearer and
// a token for Audience + "/.default", from the identity that Connection's app settings pick as
// for the other sinks (Connection__clientId: a user-assigned managed identity,
// Connection__credential=managedidentity: the system-assigned one, neither:
// DefaultAzureCredential). For an Easy Auth-protected Function or App Service (docs/webhooks.md).
type WebhookAuth struct {
	// Audience is the receiver's Application ID URI (api://...) or its app registration's client
	// id, without /.default.
	Audience string `json:"audience"`
	// Connection is the app setting name prefix X of X__clientId and X__credential.
	Connection string `json:"connection"`
}

// The storage queue encodings (Config.Encoding).
const (
	EncodingBase64 = "base64"
	EncodingText   = "text"
)

// DefaultConcurrency is Config.Concurrency's default.
const DefaultConcurrency = 16

// fields says which optional fields each type takes; the others are refused, so that a
// misplaced option ("queue" on an eventhubs sink) is an error rather than ignored.
var fields = map[string][]string{
	Webhook:      {"url", "headers", "timeout", "signing_secret", "auth"},
	StorageQueue: {"connection", "queue", "encoding", "message_ttl"},
	ServiceBus:   {"connection", "queue", "topic", "sessions"},
	EventHubs:    {"connection", "hub"},
	EventGrid:    {"connection", "event_source", "event_type"},
}

var (
	settingRef = regexp.MustCompile(`%([A-Za-z_][A-Za-z0-9_.-]*)%`)
	onlyRef    = regexp.MustCompile(`^` + settingRef.String() + `$`)
	audience   = regexp.MustCompile(`^(?:[a-z][a-z0-9+.-]*://[^\s]+|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$`)
	entityName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/~-]{0,259}$`)
	queueName  = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9]|-[a-z0-9]){2,62}$`)
	connName   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// set returns the JSON names of the optional fields cfg sets.
func (c Config) set() []string {
	var out []string
	add := func(name string, on bool) {
		if on {
			out = append(out, name)
		}
	}
	add("connection", c.Connection != "")
	add("url", c.URL != "")
	add("headers", len(c.Headers) > 0)
	add("timeout", c.Timeout != "")
	add("signing_secret", c.SigningSecret != "")
	add("auth", c.Auth != nil)
	add("queue", c.Queue != "")
	add("encoding", c.Encoding != "")
	add("message_ttl", c.MessageTTL != "")
	add("topic", c.Topic != "")
	add("sessions", c.Sessions)
	add("hub", c.Hub != "")
	add("event_source", c.EventSource != "")
	add("event_type", c.EventType != "")
	return out
}

func bad(field, format string, args ...any) error {
	return fmt.Errorf("%w: sink.%s: %s", ErrConfig, field, fmt.Sprintf(format, args...))
}

// check says what in c can never work, naming the field.
func (c Config) check() error {
	allowed, ok := fields[c.Type]
	if !ok {
		return bad("type", "%q is not one of %s", c.Type, strings.Join(Types, ", "))
	}
	for _, f := range c.set() {
		if !contains(allowed, f) {
			return bad(f, "is not an option of a %s sink (its options: %s)", c.Type, strings.Join(allowed, ", "))
		}
	}
	switch c.Mode {
	case "", ModeRow, ModeBatch:
	default:
		return bad("mode", "%q is not row or batch", c.Mode)
	}
	if c.Concurrency < 0 || c.Concurrency > 256 {
		return bad("concurrency", "%d is not between 1 and 256 (0: the default, %d)", c.Concurrency, DefaultConcurrency)
	}
	if c.Type != Webhook {
		if c.Connection == "" {
			return bad("connection", "required: the app setting name prefix of the %s connection", c.Type)
		}
		if !connName.MatchString(c.Connection) {
			return bad("connection", "%q is not an app setting name (letters, digits and _)", c.Connection)
		}
	}
	switch c.Type {
	case Webhook:
		if c.URL == "" {
			return bad("url", "required: the webhook's URL, or %%SETTING%% naming the app setting that holds it")
		}
		if !settingRef.MatchString(c.URL) {
			if err := checkURL(c.URL); err != nil {
				return bad("url", "%v", err)
			}
		}
		for k := range c.Headers {
			if !validHeader(k) {
				return bad("headers", "%q is not a header name", k)
			}
			switch h := http.CanonicalHeaderKey(k); {
			case c.Auth != nil && h == "Authorization":
				return bad("headers", "%q is what auth sets: drop one of them", k)
			case c.SigningSecret != "" && strings.HasPrefix(h, "Webhook-"):
				return bad("headers", "%q is what signing_secret sets: drop it", k)
			}
		}
		if c.Timeout != "" {
			if d, err := time.ParseDuration(c.Timeout); err != nil || d <= 0 {
				return bad("timeout", "%q is not a positive Go duration like 30s", c.Timeout)
			}
		}
		if c.SigningSecret != "" && !onlyRef.MatchString(c.SigningSecret) {
			return bad("signing_secret", "give %%SETTING%%, the app setting (a Key Vault reference in Azure) that holds the secret: a secret written here would be in the repository")
		}
		if a := c.Auth; a != nil {
			if strings.HasSuffix(a.Audience, "/.default") {
				return bad("auth.audience", "%q: drop /.default (the sink asks for the audience's /.default scope)", a.Audience)
			}
			if !audience.MatchString(a.Audience) {
				return bad("auth.audience", "%q is not the receiver's Application ID URI (api://...) or client id (a GUID)", a.Audience)
			}
			if a.Connection == "" {
				return bad("auth.connection", "required: X, the app setting name prefix of X__clientId (the user-assigned identity whose token is sent) and X__credential")
			}
			if !connName.MatchString(a.Connection) {
				return bad("auth.connection", "%q is not an app setting name prefix (letters, digits and _): X of X__clientId, the identity whose token is sent", a.Connection)
			}
		}
	case StorageQueue:
		if !queueName.MatchString(c.Queue) {
			return bad("queue", "%q is not a storage queue name (3-63 lower-case letters, digits and single hyphens)", c.Queue)
		}
		switch c.Encoding {
		case "", EncodingBase64, EncodingText:
		default:
			return bad("encoding", "%q is not base64 or text", c.Encoding)
		}
		if _, err := c.ttl(); err != nil {
			return bad("message_ttl", "%v", err)
		}
	case ServiceBus:
		if (c.Queue == "") == (c.Topic == "") {
			return bad("queue", "a servicebus sink names a queue or a topic (one of them)")
		}
		for f, v := range map[string]string{"queue": c.Queue, "topic": c.Topic} {
			if v != "" && !entityName.MatchString(v) {
				return bad(f, "%q is not a Service Bus entity name", v)
			}
		}
	case EventHubs:
		if !entityName.MatchString(c.Hub) {
			return bad("hub", "required: the event hub's name (%q is not one)", c.Hub)
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func validHeader(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if r > 126 || r <= 32 || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}

func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("is not an http(s) URL")
	}
	return nil
}

// ttl is the storage queue message TTL in seconds (-1: never expires).
func (c Config) ttl() (int32, error) {
	if c.MessageTTL == "" || c.MessageTTL == "never" {
		return -1, nil
	}
	d, err := time.ParseDuration(c.MessageTTL)
	if err != nil || d < time.Second {
		return 0, fmt.Errorf("%q is not \"never\" or a Go duration of at least 1s like 168h", c.MessageTTL)
	}
	if s := d / time.Second; s <= 1<<31-1 {
		return int32(s), nil
	}
	return -1, nil
}

// concurrency is Concurrency or its default.
func (c Config) concurrency() int {
	if c.Concurrency > 0 {
		return c.Concurrency
	}
	return DefaultConcurrency
}

// expand resolves %NAME% in URL, Headers and SigningSecret from the app settings. An unset setting is an error
// naming it; the values are never shown.
func (c Config) expand(getenv func(string) string) (Config, error) {
	var missing []string
	sub := func(s string) string {
		return settingRef.ReplaceAllStringFunc(s, func(ref string) string {
			name := ref[1 : len(ref)-1]
			v := strings.TrimSpace(getenv(name))
			if v == "" {
				missing = append(missing, name)
			}
			return v
		})
	}
	out := c
	out.URL = sub(c.URL)
	out.SigningSecret = sub(c.SigningSecret)
	if len(c.Headers) > 0 {
		out.Headers = make(map[string]string, len(c.Headers))
		for k, v := range c.Headers {
			out.Headers[k] = sub(v)
		}
	}
	if len(missing) > 0 {
		return Config{}, fmt.Errorf("sink %s: app setting %s is not set (the sink's definition names it as %%%s%%)", c.Type, strings.Join(missing, ", "), missing[0])
	}
	if c.Type == Webhook && out.URL != c.URL {
		if err := checkURL(out.URL); err != nil {
			return Config{}, fmt.Errorf("sink webhook: the URL the sink's %s names %v", strconv.Quote(c.URL), err)
		}
	}
	return out, nil
}
