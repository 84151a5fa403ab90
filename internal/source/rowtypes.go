package source

import "github.com/pseudotrigger/pseudotrigger/internal/source/row"

// The names below are package row's, under which the drivers and the runtime knew them before it
// was cut out of this package; they go once their users name package row.

type (
	Row         = row.Row
	Transaction = row.Transaction
	Change      = row.Change
	Images      = row.Images
	Commit      = row.Commit
	ColumnType  = row.ColumnType
	Class       = row.Class
	TSFlavor    = row.TSFlavor
	KeyCodec    = row.KeyCodec
	RawRows     = row.RawRows
	RawColumn   = row.RawColumn
	TaggedField = row.TaggedField
)

const (
	ClassOther      = row.ClassOther
	ClassInt        = row.ClassInt
	ClassText       = row.ClassText
	ClassDecimal    = row.ClassDecimal
	ClassFloat      = row.ClassFloat
	ClassReal       = row.ClassReal
	ClassTime       = row.ClassTime
	ClassBinary     = row.ClassBinary
	ClassUUID       = row.ClassUUID
	ClassJSON       = row.ClassJSON
	ClassXID8       = row.ClassXID8
	ClassRowversion = row.ClassRowversion
	ClassBool       = row.ClassBool
	ClassArray      = row.ClassArray
	TSNone          = row.TSNone
	TSWithZone      = row.TSWithZone
	TSUTC           = row.TSUTC
	TSText          = row.TSText
	TSUnsupported   = row.TSUnsupported
	OpInsert        = row.OpInsert
	OpUpdate        = row.OpUpdate
	OpDelete        = row.OpDelete
	OpUpsert        = row.OpUpsert
	OpRead          = row.OpRead
)

var (
	TextCodec         = row.TextCodec
	TimeCodec         = row.TimeCodec
	ErrUnreachableRow = row.ErrUnreachableRow
	TaggedFields      = row.TaggedFields
	FormatLSN         = row.FormatLSN
	BaseType          = row.BaseType
	FixedWidth        = row.FixedWidth
)
