package azconn

import (
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/pseudotrigger/pseudotrigger/internal/redact"
)

// DevelopmentQueueConnectionString is Azurite's public account with its queue service on the
// default port: what UseDevelopmentStorage=true means, as azqueue does not map the shorthand.
const DevelopmentQueueConnectionString = "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;" +
	"AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;" +
	"QueueEndpoint=http://127.0.0.1:10001/devstoreaccount1;"

// QueueClient returns a client of queue over the storage queue connection named connection (X,
// UseDevelopmentStorage=true being Azurite's queue on its default port, or X__queueServiceUri),
// as a storagequeue sink and the local host's queue trigger connect, and the connection, for
// messages. It sends nothing.
func QueueClient(getenv func(string) string, connection, queue string, opts *azqueue.ClientOptions) (*azqueue.QueueClient, Conn, error) {
	conn, err := Resolve(getenv, connection, "queueServiceUri", "https://ACCOUNT.queue.core.windows.net", false)
	if err != nil {
		return nil, conn, err
	}
	if cs := conn.ConnectionString; cs != "" {
		p := ParseConnectionString(cs)
		if strings.EqualFold(p["usedevelopmentstorage"], "true") {
			cs = DevelopmentQueueConnectionString
		} else if p["queueendpoint"] == "" && p["accountname"] == "" {
			return nil, conn, fmt.Errorf("%s: the connection string names no AccountName or QueueEndpoint (%s)", conn.Setting, redact.ConnectionString(cs))
		}
		q, err := azqueue.NewQueueClientFromConnectionString(cs, queue, opts)
		if err != nil {
			return nil, conn, fmt.Errorf("%s: the connection string is not valid (%s)", conn.Setting, redact.ConnectionString(cs))
		}
		return q, conn, nil
	}
	cred, err := conn.Identity.TokenCredential(conn.Setting)
	if err != nil {
		return nil, conn, err
	}
	q, err := azqueue.NewQueueClient(conn.Endpoint+"/"+queue, cred, opts)
	if err != nil {
		return nil, conn, fmt.Errorf("%s: %w", conn.Setting, err)
	}
	return q, conn, nil
}
