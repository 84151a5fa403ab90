package source

import "github.com/pseudotrigger/pseudotrigger/internal/source/setup"

// The names below are package setup's, under which the drivers and the runtime knew them before
// it was cut out of this package; they go once their users name package setup.

type (
	Finding     = setup.Finding
	KeyVerdict  = setup.KeyVerdict
	UniqueIndex = setup.UniqueIndex
	Uniqueness  = setup.Uniqueness
	Verdict     = setup.Verdict
	Stamping    = setup.Stamping
)

const (
	CheckBefore     = setup.CheckBefore
	CheckCDC        = setup.CheckCDC
	CheckColumns    = setup.CheckColumns
	CheckIndex      = setup.CheckIndex
	CheckPrivileges = setup.CheckPrivileges
	CheckStamped    = setup.CheckStamped
	CheckTable      = setup.CheckTable
	CheckTypes      = setup.CheckTypes
	CheckUniqueKey  = setup.CheckUniqueKey
	VerdictOK       = setup.VerdictOK
	VerdictOffer    = setup.VerdictOffer
	VerdictProblem  = setup.VerdictProblem
	VerdictUnknown  = setup.VerdictUnknown
	KeyUnknown      = setup.KeyUnknown
	KeyUnique       = setup.KeyUnique
	KeyNotUnique    = setup.KeyNotUnique
)

var (
	ColumnsFinding  = setup.ColumnsFinding
	CounterName     = setup.CounterName
	Fixes           = setup.Fixes
	IndexFinding    = setup.IndexFinding
	IndexName       = setup.IndexName
	IndexServes     = setup.IndexServes
	JoinStatements  = setup.JoinStatements
	JudgeKey        = setup.JudgeKey
	KeysetColumns   = setup.KeysetColumns
	Missing         = setup.Missing
	Problems        = setup.Problems
	StampFinding    = setup.StampFinding
	StampName       = setup.StampName
	TableAndColumns = setup.TableAndColumns
)
