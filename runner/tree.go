package runner

import (
	"sync"
	"syscall"
	"time"
)

// giveUpAfter bounds how long after SIGKILL the runner keeps looking for
// survivors (processes stuck in uninterruptible sleep cannot be killed).
const giveUpAfter = 5 * time.Second

// tree tracks one command's processes: its session and group (both the
// leader's pid) plus, where the platform can see them, processes that left
// the session but carry the run's marker or descend from one that does.
type tree struct {
	leader      int
	marker      string
	cg          *cgroup      // the run's cgroup, or nil
	moved       *cgroup      // the cgroup a wrapper moved the process into, or nil
	empty       bool         // end saw nothing left, cgroup included
	seen        map[int]bool // non-leader processes found alive
	termed      map[int]bool // processes already sent SIGTERM
	groupTermed bool
}

func newTree(leader int, marker string, cg *cgroup) *tree {
	return &tree{leader: leader, marker: marker, cg: cg}
}

// cgroupDirs returns the directories of the cgroups that hold the tree.
func (t *tree) cgroupDirs() []string {
	var dirs []string
	for _, cg := range []*cgroup{t.cg, t.moved} {
		if cg != nil {
			dirs = append(dirs, cg.dir)
		}
	}
	return dirs
}

// live returns the tree's live processes other than the leader: those the
// platform's sweep finds plus everything in the run's cgroup.
func (t *tree) live() []int {
	live := t.scan()
	if t.cg != nil {
		live = t.cg.add(live, t.leader)
	}
	if t.moved != nil {
		live = t.moved.add(live, t.leader)
	}
	return live
}

func (t *tree) note(live []int) {
	if len(live) == 0 {
		return
	}
	if t.seen == nil {
		t.seen = map[int]bool{}
	}
	for _, pid := range live {
		t.seen[pid] = true
	}
}

// killed returns how many processes other than the leader were found alive
// and ended.
func (t *tree) killed() int { return len(t.seen) }

// end ends the whole tree: SIGTERM to the group and every escaped process,
// SIGKILL once grace has passed, until nothing is left. While the leader
// has not been waited for, st is nil and waitCh delivers its status; end
// returns that status.
func (t *tree) end(grace time.Duration, waitCh <-chan *exitStatus, st *exitStatus) *exitStatus {
	killAt := time.Now().Add(grace)
	giveUp := killAt.Add(giveUpAfter)
	pause := 200 * time.Microsecond
	for {
		if st == nil {
			select {
			case st = <-waitCh:
			default:
			}
		}
		live := t.live()
		t.note(live)
		if st != nil && len(live) == 0 && !groupExists(t.leader) {
			t.empty = true
			return st
		}
		now := time.Now()
		if now.After(giveUp) {
			if st == nil {
				st = <-waitCh
			}
			return st
		}
		if now.Before(killAt) {
			if !t.groupTermed {
				signalGroup(t.leader, syscall.SIGTERM)
				t.groupTermed = true
			}
			for _, pid := range live {
				if t.termed == nil {
					t.termed = map[int]bool{}
				}
				if !t.termed[pid] {
					signalProcess(pid, syscall.SIGTERM)
					t.termed[pid] = true
				}
			}
		} else {
			if t.cg != nil {
				t.cg.kill()
			}
			if t.moved != nil {
				t.moved.kill() // v2; on v1 the pids above get SIGKILL one by one
			}
			signalGroup(t.leader, syscall.SIGKILL)
			for _, pid := range live {
				signalProcess(pid, syscall.SIGKILL)
			}
		}
		if st == nil {
			timer := time.NewTimer(pause)
			select {
			case st = <-waitCh:
			case <-timer.C:
			}
			timer.Stop()
		} else {
			time.Sleep(pause)
		}
		pause = min(2*pause, 20*time.Millisecond)
	}
}

// keep leaves the tree running and returns how many processes other than
// the (already exited) leader are still alive. They are remembered so that
// the host reaps them once they exit.
func (t *tree) keep() int {
	live := t.live()
	keptMu.Lock()
	for _, pid := range live {
		kept[pid] = true
	}
	keptMu.Unlock()
	if len(live) == 0 && groupExists(t.leader) {
		return 1 // the platform cannot list them; at least one is left
	}
	return len(live)
}

// Host-wide bookkeeping shared by all runs.
var (
	leadersMu sync.Mutex
	leaders   = map[int]bool{} // main processes of runs in progress

	keptMu sync.Mutex
	kept   = map[int]bool{} // processes left running by KeepLeftovers
)

func registerLeader(pid int) {
	leadersMu.Lock()
	leaders[pid] = true
	leadersMu.Unlock()
}

func unregisterLeader(pid int) {
	leadersMu.Lock()
	delete(leaders, pid)
	leadersMu.Unlock()
}

func isLeader(pid int) bool {
	leadersMu.Lock()
	defer leadersMu.Unlock()
	return leaders[pid]
}
