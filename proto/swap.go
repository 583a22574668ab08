package proto

// Swap frames (boot/replhub_toolkit/swap.py): the hub asks a worker to pickle its
// namespace (Swap) and a new worker to load it back (Restore).
//
// Locally Path names the file the worker writes, or reads after checking
// that it is a regular file of its user with no group or other bits. A
// remote worker gets no Path: a swap's bytes come to the hub as Chunk
// frames with the Sid, before Swapped; a restore's go to the worker as
// Chunk frames, each acknowledged, after the worker's Ack with Seq -1 says
// it is ready for them. Either way no frame carries a swap as a payload:
// the chunks bound what is read at once (ChunkSize), so a swap of any size
// costs the hub one chunk's memory, and no bound like MaxBlob applies to
// it. What bounds a remote swap is this machine's disk: the hub stops one
// that would leave less than 1 GiB (or a twentieth of the disk) free.

// Ops of the swap frames.
const (
	OpSwap     = "swap"     // hub → worker
	OpSwapped  = "swapped"  // worker → hub
	OpRestore  = "restore"  // hub → worker
	OpRestored = "restored" // worker → hub
)

// Swap asks the worker to pickle its namespace, name by name. Without
// Force, a worker with a background job (a thread that is not a daemon, a
// child process) declines and says which in Swapped.Job.
type Swap struct {
	Head
	Sid   int64  `json:"sid"`
	Path  string `json:"path,omitempty"`
	Force bool   `json:"force,omitempty"`
}

// SwapSkip is a name that did not pickle (or load), and why.
type SwapSkip struct {
	Name string `json:"name"`
	Why  string `json:"why"`
}

// Swapped answers a Swap: OK with what was kept (Names), what was not
// (Skipped), the threads and child processes that ran, the swap's Size in
// bytes and the worker's Cwd; or not OK, with Job (a background job runs)
// or Error.
type Swapped struct {
	Head
	Sid      int64      `json:"sid"`
	OK       bool       `json:"ok"`
	Error    string     `json:"error,omitempty"`
	Job      string     `json:"job,omitempty"`
	Names    []string   `json:"names,omitempty"`
	Skipped  []SwapSkip `json:"skipped,omitempty"`
	Threads  []string   `json:"threads,omitempty"`
	Children []string   `json:"children,omitempty"`
	Size     int64      `json:"size,omitempty"`
	Cwd      string     `json:"cwd,omitempty"`
}

// Restore asks a new worker to load a swap into its namespace.
type Restore struct {
	Head
	Sid  int64  `json:"sid"`
	Path string `json:"path,omitempty"`
}

// Restored answers a Restore: the names loaded, those that failed to load,
// and a Note (its old folder is gone); or not OK, with Error.
type Restored struct {
	Head
	Sid     int64      `json:"sid"`
	OK      bool       `json:"ok"`
	Error   string     `json:"error,omitempty"`
	Names   []string   `json:"names,omitempty"`
	Skipped []SwapSkip `json:"skipped,omitempty"`
	Note    string     `json:"note,omitempty"`
}

func (*Swap) Op() string     { return OpSwap }
func (*Swapped) Op() string  { return OpSwapped }
func (*Restore) Op() string  { return OpRestore }
func (*Restored) Op() string { return OpRestored }

func init() {
	fromWorker[OpSwapped] = func() Msg { return new(Swapped) }
	fromWorker[OpRestored] = func() Msg { return new(Restored) }
	fromHub[OpSwap] = func() Msg { return new(Swap) }
	fromHub[OpRestore] = func() Msg { return new(Restore) }
}
