//! The server-wide bounds on running tools, the queue of tasks waiting to
//! run, and the fair share of its slots between callers: [`Admission`], its
//! [`RunSlot`]s and [`Ticket`]s. How it behaves is told where users read it,
//! on [`AdmissionLimits`]. The counts are this process's; on a store shared
//! by replicas the same bounds also hold across all of them
//! ([`shared`](super::shared)), and on one that keeps fair turns this queue
//! bounds nothing: the store decides the turns.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::caller::Caller;
use super::refusal::{Refusal, queue_full};
use crate::server::auth::principal::Principal;
use crate::store::FastMap;

/// How many tools may run at once, server-wide, unless the builder says
/// otherwise.
pub const DEFAULT_MAX_RUNNING: usize = 1024;

/// How many tasks may wait to run, server-wide, unless the builder says
/// otherwise.
pub const DEFAULT_MAX_QUEUED: usize = 10_000;

/// Weights are counted in these parts, so a weight of 1 costs this much per
/// slot and a weight of 4 a quarter of it: a multiple of every weight up to
/// 16, so those divide it exactly.
const SHARE: u64 = 720_720 * 1_000;

/// The bounds on the work a server takes on:
/// [`TaskRuntimeBuilder::with_admission`](crate::server::TaskRuntimeBuilder::with_admission).
///
/// A task past [`with_max_running`](Self::with_max_running) (or its tool's
/// [`with_tool_concurrency`](Self::with_tool_concurrency)) is created and
/// queued: `working`, its status message says how many tasks are ahead of
/// it (`queued: 3 tasks ahead`, brought up to date at most once a second),
/// and its tool starts when a slot frees. Its TTL and maximum lifetime run
/// while it waits; a cancel (or its expiry) takes it out of the queue
/// without running it. Past [`with_max_queued`](Self::with_max_queued) a
/// creation is refused: -32603 with `data.reason: "queueFull"` and
/// `retryAfterMs`, over HTTP status 503 with `Retry-After`.
///
/// **Fair share.** Slots go to callers (the principal a caller's caps count
/// under: with bearer tokens, its token's label), not to tasks in arrival
/// order: each caller has a count of the slots it was given (divided by its
/// [weight](Self::with_weight)), and a freed slot goes to the waiting
/// caller with the lowest count, the one waiting longest on a tie. A caller
/// that starts waiting gets the count of the last caller served if its own
/// is lower, so a caller that was idle cannot save up turns. So a burst of a
/// thousand tasks from one caller delays another caller's single task by at
/// most one slot turn. A caller's own tasks run in the order they came. A
/// task whose tool is at its own bound is passed over for the next task
/// that can run.
///
/// The bounds hold per process on memory and SQLite, and for all replicas
/// together on a store they share (Redis, PostgreSQL). The fair turns too, on a shared
/// store that [keeps them](crate::store::Replicas::supports_fair_share)
/// (Redis, PostgreSQL) when some caller has a weight and `max_running` is set: a running slot then goes to a caller
/// that is the least served of those waiting on every replica, a queued
/// task says `queued: waiting for a free slot on the servers` instead of
/// how many are ahead, and a slot held back 2 s for a caller that does not
/// take it (its replica died, its tool is at its bound) goes to another.
///
/// ```
/// use mcp_tasks::server::AdmissionLimits;
///
/// let limits = AdmissionLimits::default()
///     .with_max_running(Some(8))
///     .with_max_queued(Some(1000))
///     .with_tool_concurrency("export", 2);
/// # let _ = limits;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AdmissionLimits {
    max_running: Option<usize>,
    max_queued: Option<usize>,
    per_tool: HashMap<String, usize>,
    weights: HashMap<Principal, u32>,
}

impl Default for AdmissionLimits {
    /// [`DEFAULT_MAX_RUNNING`] tools at once, [`DEFAULT_MAX_QUEUED`] waiting,
    /// no bound per tool, every caller of weight 1.
    fn default() -> Self {
        Self {
            max_running: Some(DEFAULT_MAX_RUNNING),
            max_queued: Some(DEFAULT_MAX_QUEUED),
            per_tool: HashMap::new(),
            weights: HashMap::new(),
        }
    }
}

impl AdmissionLimits {
    /// No bound at all: every task runs at once (the runtime before
    /// admission control).
    pub fn unbounded() -> Self {
        Self {
            max_running: None,
            max_queued: None,
            per_tool: HashMap::new(),
            weights: HashMap::new(),
        }
    }

    /// How many tools run at once, server-wide (`None`: no bound; `Some(0)`
    /// is taken as 1). A task past it waits in the queue.
    pub fn with_max_running(mut self, max: Option<usize>) -> Self {
        self.max_running = max.map(|max| max.max(1));
        self
    }

    /// How many tasks may wait to run (`None`: no bound). Running tasks do
    /// not count. A creation past it is refused: -32603 with
    /// `data.reason: "queueFull"`, and over HTTP status 503.
    pub fn with_max_queued(mut self, max: Option<usize>) -> Self {
        self.max_queued = max;
        self
    }

    /// How many calls of the tool `name` run at once (0 is taken as 1).
    pub fn with_tool_concurrency(mut self, name: impl Into<String>, max: usize) -> Self {
        self.per_tool.insert(name.into(), max.max(1));
        self
    }

    /// The share of the slots that `principal` (a caller's quota
    /// principal: with bearer tokens, its token's label) gets when others
    /// wait too (default 1; 0 is taken as 1): a caller of weight 3 is given
    /// three slots for another's one.
    pub fn with_weight(mut self, principal: Principal, weight: u32) -> Self {
        self.weights.insert(principal, weight.max(1));
        self
    }

    /// What one slot adds to the share count of the caller counted as
    /// `quota`: a larger weight is a smaller share.
    pub(crate) fn share(&self, quota: &Principal) -> u64 {
        SHARE / u64::from(self.weights.get(quota).copied().unwrap_or(1))
    }

    /// Whether some caller has a weight of its own.
    pub(crate) fn has_weights(&self) -> bool {
        !self.weights.is_empty()
    }

    /// The bound on running tools.
    pub fn max_running(&self) -> Option<usize> {
        self.max_running
    }

    /// The bound on waiting tasks.
    pub fn max_queued(&self) -> Option<usize> {
        self.max_queued
    }

    /// The bound on running calls of the tool `name`, if it has one.
    pub fn tool_concurrency(&self, name: &str) -> Option<usize> {
        self.per_tool.get(name).copied()
    }
}

/// How busy a runtime is, in this process: `TaskRuntime::load`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Load {
    /// Tools running now.
    pub running: usize,
    /// Tasks waiting for a slot to run.
    pub queued: usize,
    /// How long the task that has waited longest for a slot has waited
    /// (`None` with none waiting).
    pub oldest_queued: Option<Duration>,
}

/// The queue and the counts of one runtime.
#[derive(Debug)]
pub(crate) struct Admission {
    limits: AdmissionLimits,
    /// Whether the store keeps the bounds and the fair turns for all
    /// replicas ([`shared`](super::shared)): then every task has a slot
    /// here at once, and waits for its turn in the store.
    turns_in_store: bool,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    running: usize,
    running_by_tool: FastMap<String, usize>,
    /// Callers with tasks waiting, or served lately.
    callers: FastMap<Principal, Waiting>,
    queued: usize,
    /// The share count of the caller served last.
    served_last: u64,
    /// Orders the waiting tasks (and so the callers, on a tie).
    next_number: u64,
}

/// One caller's waiting tasks and its count of slots given.
#[derive(Debug, Default)]
struct Waiting {
    served: u64,
    tasks: VecDeque<Queued>,
}

/// A task in the queue.
#[derive(Debug)]
struct Queued {
    number: u64,
    /// When it began to wait.
    since: Instant,
    tool: String,
    start: oneshot::Sender<RunSlot>,
}

/// What [`Admission::enter`] decides.
#[derive(Debug)]
pub(crate) enum Entry {
    /// Run now.
    Run(RunSlot),
    /// Wait for a slot.
    Queued(Ticket),
}

/// A running tool's slot: given back (and the next task started) when
/// dropped.
#[derive(Debug)]
pub(crate) struct RunSlot {
    admission: Weak<Admission>,
    tool: String,
}

/// A queued task's ticket: its place, and the slot that arrives when its
/// turn comes.
#[derive(Debug)]
pub(crate) struct Ticket {
    pub(crate) place: Place,
    pub(crate) start: oneshot::Receiver<RunSlot>,
}

/// A queued task's place in the queue; dropped (the task cancelled or
/// expired), the task leaves the queue.
#[derive(Debug)]
pub(crate) struct Place {
    admission: Weak<Admission>,
    quota: Principal,
    number: u64,
}

impl Admission {
    #[cfg(test)]
    pub(crate) fn new(limits: AdmissionLimits) -> Arc<Self> {
        Self::with_turns(limits, false)
    }

    /// Admission whose bounds and fair turns are kept by the store when
    /// `turns_in_store`: this process then counts its running tools but
    /// bounds nothing and queues nothing.
    pub(crate) fn with_turns(limits: AdmissionLimits, turns_in_store: bool) -> Arc<Self> {
        Arc::new(Self {
            limits,
            turns_in_store,
            state: Mutex::default(),
        })
    }

    /// The bounds.
    pub(crate) fn limits(&self) -> &AdmissionLimits {
        &self.limits
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a task of `tool` may start now.
    fn has_room(&self, state: &State, tool: &str) -> bool {
        self.turns_in_store
            || self
                .limits
                .max_running
                .is_none_or(|max| state.running < max)
                && self
                    .limits
                    .per_tool
                    .get(tool)
                    .is_none_or(|max| state.running_by_tool.get(tool).copied().unwrap_or(0) < *max)
    }

    fn share_of(&self, quota: &Principal) -> u64 {
        self.limits.share(quota)
    }

    /// A slot now for a task of `tool` from `caller`, or a place in the
    /// queue, or the refusal of a full queue.
    pub(crate) fn enter(self: &Arc<Self>, caller: &Caller, tool: &str) -> Result<Entry, Refusal> {
        self.enter_as(caller, tool, true)
    }

    /// [`Admission::enter`] for a task taken over from a server that
    /// stopped: queued even past the bound, never refused.
    pub(crate) fn enter_taken_over(self: &Arc<Self>, caller: &Caller, tool: &str) -> Entry {
        match self.enter_as(caller, tool, false) {
            Ok(entry) => entry,
            Err(_) => unreachable!("a taken-over task is never refused"),
        }
    }

    fn enter_as(
        self: &Arc<Self>,
        caller: &Caller,
        tool: &str,
        may_refuse: bool,
    ) -> Result<Entry, Refusal> {
        let mut state = self.state();
        // Whenever a slot is free, every task that could take it has
        // (`dispatch`): so a free slot here is this task's.
        if self.has_room(&state, tool) {
            if state.queued == 0 {
                // Nobody waits: what callers were given before no longer
                // matters to anyone.
                state.callers.clear();
            }
            let share = self.share_of(&caller.quota);
            let served_last = state.served_last;
            let waiting = state.callers.entry(caller.quota.clone()).or_default();
            waiting.served = waiting.served.max(served_last) + share;
            return Ok(Entry::Run(self.start(&mut state, tool)));
        }
        if let Some(max) = self.limits.max_queued
            && may_refuse
            && state.queued >= max
        {
            return Err(queue_full(u64::try_from(max).unwrap_or(u64::MAX)));
        }
        let (start, started) = oneshot::channel();
        let number = state.next_number;
        state.next_number += 1;
        state.queued += 1;
        let served_last = state.served_last;
        let waiting = state.callers.entry(caller.quota.clone()).or_default();
        if waiting.tasks.is_empty() {
            waiting.served = waiting.served.max(served_last);
        }
        waiting.tasks.push_back(Queued {
            number,
            since: Instant::now(),
            tool: tool.to_owned(),
            start,
        });
        Ok(Entry::Queued(Ticket {
            place: Place {
                admission: Arc::downgrade(self),
                quota: caller.quota.clone(),
                number,
            },
            start: started,
        }))
    }

    /// Counts a task of `tool` as running.
    fn start(self: &Arc<Self>, state: &mut State, tool: &str) -> RunSlot {
        state.running += 1;
        *state.running_by_tool.entry(tool.to_owned()).or_default() += 1;
        RunSlot {
            admission: Arc::downgrade(self),
            tool: tool.to_owned(),
        }
    }

    /// Hands free slots to waiting tasks, fairly (see the module docs).
    fn dispatch(self: &Arc<Self>, state: &mut State) {
        loop {
            // The caller with the lowest count (the earliest waiting on a
            // tie) that has a task able to run now.
            let mut best: Option<(u64, u64, Principal, usize)> = None;
            for (quota, waiting) in &state.callers {
                let Some(index) = waiting
                    .tasks
                    .iter()
                    .position(|task| self.has_room(state, &task.tool))
                else {
                    continue;
                };
                let key = (waiting.served, waiting.tasks[index].number);
                if best
                    .as_ref()
                    .is_none_or(|(served, number, _, _)| key < (*served, *number))
                {
                    best = Some((key.0, key.1, quota.clone(), index));
                }
            }
            let Some((served, _, quota, index)) = best else {
                return;
            };
            let share = self.share_of(&quota);
            let waiting = state.callers.get_mut(&quota).expect("just found");
            let task = waiting.tasks.remove(index).expect("just found");
            waiting.served = served + share;
            state.served_last = served;
            state.queued -= 1;
            let slot = self.start(state, &task.tool);
            if let Err(slot) = task.start.send(slot) {
                // Its task was just dropped: give the slot back, quietly.
                let mut slot = slot;
                slot.admission = Weak::new();
                self.stop(state, &slot.tool);
            }
        }
    }

    /// Counts a task of `tool` as no longer running.
    fn stop(&self, state: &mut State, tool: &str) {
        state.running = state.running.saturating_sub(1);
        if let Some(count) = state.running_by_tool.get_mut(tool) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                state.running_by_tool.remove(tool);
            }
        }
    }

    /// How many waiting tasks will start before the one numbered `number`
    /// of `quota`: its caller's tasks before it, and of every other caller
    /// the tasks whose turn comes first. Bounds per tool are not foreseen.
    fn ahead(&self, quota: &Principal, number: u64) -> Option<usize> {
        let state = self.state();
        let own = state.callers.get(quota)?;
        let index = own.tasks.iter().position(|task| task.number == number)?;
        let share = self.share_of(quota);
        // Its turn comes when its caller's count reaches this.
        let turn = own.served + share * index as u64;
        let mut ahead = index;
        for (other, waiting) in &state.callers {
            if other == quota || waiting.tasks.is_empty() {
                continue;
            }
            let other_share = self.share_of(other);
            // The other's tasks whose count comes before `turn`; on a tie,
            // the one that came first goes first.
            let before = match turn.checked_sub(waiting.served) {
                None => 0,
                Some(gap) => {
                    let mut before = gap.div_ceil(other_share);
                    if gap % other_share == 0
                        && let Some(task) = waiting
                            .tasks
                            .get(usize::try_from(before).unwrap_or(usize::MAX))
                        && task.number < number
                    {
                        before += 1;
                    }
                    before
                }
            };
            ahead += usize::try_from(before)
                .unwrap_or(usize::MAX)
                .min(waiting.tasks.len());
        }
        Some(ahead)
    }

    /// [`Admission::counts`] for the runtime's users.
    pub(crate) fn load(&self) -> Load {
        let state = self.state();
        // Each caller's first waiting task is its oldest.
        let oldest = state
            .callers
            .values()
            .filter_map(|waiting| waiting.tasks.front())
            .map(|queued| queued.since)
            .min();
        Load {
            running: state.running,
            queued: state.queued,
            oldest_queued: oldest.map(|since| since.elapsed()),
        }
    }

    /// How many tools run and how many tasks wait, now.
    #[cfg(test)]
    pub(crate) fn counts(&self) -> (usize, usize) {
        let state = self.state();
        (state.running, state.queued)
    }

    /// How many tools of each name run now (names with none left out).
    pub(crate) fn running_by_tool(&self) -> Vec<(String, usize)> {
        let state = self.state();
        let mut running: Vec<(String, usize)> = state
            .running_by_tool
            .iter()
            .filter(|(_, count)| **count > 0)
            .map(|(tool, count)| (tool.clone(), *count))
            .collect();
        running.sort();
        running
    }
}

impl Drop for RunSlot {
    fn drop(&mut self) {
        let Some(admission) = self.admission.upgrade() else {
            return;
        };
        let mut state = admission.state();
        admission.stop(&mut state, &self.tool);
        admission.dispatch(&mut state);
    }
}

impl Place {
    /// How many tasks will start before this one (`None` once it started).
    pub(crate) fn ahead(&self) -> Option<usize> {
        self.admission.upgrade()?.ahead(&self.quota, self.number)
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let Some(admission) = self.admission.upgrade() else {
            return;
        };
        let mut state = admission.state();
        let Some(waiting) = state.callers.get_mut(&self.quota) else {
            return;
        };
        if let Some(index) = waiting
            .tasks
            .iter()
            .position(|task| task.number == self.number)
        {
            waiting.tasks.remove(index);
            state.queued -= 1;
            // A task of a bounded tool may have blocked others: look again.
            admission.dispatch(&mut state);
        }
    }
}

/// The status message of a task with `ahead` tasks before it in the queue.
pub(crate) fn queued_message(ahead: usize) -> String {
    match ahead {
        0 => "queued: next to run".to_owned(),
        1 => "queued: 1 task ahead".to_owned(),
        n => format!("queued: {n} tasks ahead"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(name: &str) -> Caller {
        Caller::owner(Principal::new(name))
    }

    fn run(entry: Entry) -> RunSlot {
        match entry {
            Entry::Run(slot) => slot,
            Entry::Queued(_) => panic!("should run at once"),
        }
    }

    fn queued(entry: Entry) -> Ticket {
        match entry {
            Entry::Queued(ticket) => ticket,
            Entry::Run(_) => panic!("should be queued"),
        }
    }

    /// The slot handed to `ticket`, if its turn came.
    fn started(ticket: &mut Ticket) -> Option<RunSlot> {
        ticket.start.try_recv().ok()
    }

    #[tokio::test(start_paused = true)]
    async fn the_load_tells_the_oldest_wait_and_the_tools_running() {
        let admission = Admission::new(AdmissionLimits::default().with_max_running(Some(2)));
        let a = caller("a");
        let first = run(admission.enter(&a, "export").unwrap());
        let _second = run(admission.enter(&a, "build").unwrap());
        assert_eq!(admission.load().oldest_queued, None);
        let mut waiting = queued(admission.enter(&a, "build").unwrap());
        tokio::time::advance(Duration::from_secs(30)).await;
        let _later = queued(admission.enter(&a, "export").unwrap());
        tokio::time::advance(Duration::from_secs(5)).await;
        let load = admission.load();
        assert_eq!((load.running, load.queued), (2, 2));
        assert_eq!(load.oldest_queued, Some(Duration::from_secs(35)));
        assert_eq!(
            admission.running_by_tool(),
            vec![("build".to_owned(), 1), ("export".to_owned(), 1)]
        );
        drop(first);
        let _slot = started(&mut waiting).expect("the first waiting task starts");
        assert_eq!(admission.load().oldest_queued, Some(Duration::from_secs(5)));
        assert_eq!(admission.running_by_tool(), vec![("build".to_owned(), 2)]);
    }

    #[test]
    fn past_the_running_bound_tasks_wait_and_start_in_order_as_slots_free() {
        let admission = Admission::new(AdmissionLimits::default().with_max_running(Some(2)));
        let a = caller("a");
        let first = run(admission.enter(&a, "t").unwrap());
        let _second = run(admission.enter(&a, "t").unwrap());
        let mut third = queued(admission.enter(&a, "t").unwrap());
        let mut fourth = queued(admission.enter(&a, "t").unwrap());
        assert_eq!(admission.counts(), (2, 2));
        assert_eq!(
            (third.place.ahead(), fourth.place.ahead()),
            (Some(0), Some(1))
        );
        drop(first);
        let _third_slot = started(&mut third).expect("the third starts when the first ends");
        assert!(started(&mut fourth).is_none());
        assert_eq!(admission.counts(), (2, 1));
        assert_eq!(fourth.place.ahead(), Some(0));
    }

    #[test]
    fn past_the_queue_bound_a_creation_is_refused_with_a_retry_hint() {
        let admission = Admission::new(
            AdmissionLimits::default()
                .with_max_running(Some(1))
                .with_max_queued(Some(1)),
        );
        let a = caller("a");
        let _running = run(admission.enter(&a, "t").unwrap());
        let _waiting = queued(admission.enter(&a, "t").unwrap());
        let refused = admission.enter(&a, "t").unwrap_err().into_error(None);
        assert_eq!(refused.code.0, -32603);
        let data = refused.data.expect("data");
        assert_eq!(data["reason"], "queueFull");
        assert_eq!(data["maxQueued"], 1);
        assert!(data["retryAfterMs"].as_u64().is_some_and(|ms| ms > 0));
        // A task taken over from a stopped server is queued anyway.
        let _taken = queued(admission.enter_taken_over(&a, "t"));
        assert_eq!(admission.counts(), (1, 2));
    }

    #[test]
    fn a_cancelled_waiting_task_leaves_the_queue_and_never_gets_a_slot() {
        let admission = Admission::new(AdmissionLimits::default().with_max_running(Some(1)));
        let a = caller("a");
        let running = run(admission.enter(&a, "t").unwrap());
        let cancelled = queued(admission.enter(&a, "t").unwrap());
        let mut next = queued(admission.enter(&a, "t").unwrap());
        assert_eq!(next.place.ahead(), Some(1));
        drop(cancelled);
        assert_eq!(next.place.ahead(), Some(0));
        assert_eq!(admission.counts(), (1, 1));
        drop(running);
        let _slot = started(&mut next).expect("the next task starts");
        assert_eq!(admission.counts(), (1, 0));
    }

    #[test]
    fn a_burst_from_one_caller_delays_another_callers_task_by_one_turn() {
        let admission = Admission::new(AdmissionLimits::default().with_max_running(Some(1)));
        let (a, b) = (caller("a"), caller("b"));
        let mut slot = Some(run(admission.enter(&a, "t").unwrap()));
        let mut burst: Vec<Ticket> = (0..9)
            .map(|_| queued(admission.enter(&a, "t").unwrap()))
            .collect();
        let mut single = queued(admission.enter(&b, "t").unwrap());
        assert_eq!(single.place.ahead(), Some(0), "b's task is next");
        assert_eq!(burst[0].place.ahead(), Some(1));
        drop(slot.take());
        slot = Some(started(&mut single).expect("b's task runs second"));
        assert!(burst.iter_mut().all(|ticket| started(ticket).is_none()));
        drop(slot.take());
        assert!(started(&mut burst[0]).is_some(), "then a's burst, in order");
    }

    #[test]
    fn two_busy_callers_alternate_and_a_weight_gives_more_turns() {
        let (a, b) = (caller("a"), caller("b"));
        let order = |limits: AdmissionLimits| {
            let admission = Admission::new(limits.with_max_running(Some(1)));
            let first = run(admission.enter(&caller("other"), "t").unwrap());
            let mut tickets: Vec<(char, Ticket)> = Vec::new();
            for _ in 0..4 {
                tickets.push(('a', queued(admission.enter(&a, "t").unwrap())));
                tickets.push(('b', queued(admission.enter(&b, "t").unwrap())));
            }
            let mut order = String::new();
            let mut slot = first;
            for _ in 0..8 {
                drop(slot);
                let (name, started) = tickets
                    .iter_mut()
                    .find_map(|(name, ticket)| Some((*name, started(ticket)?)))
                    .expect("one task started");
                order.push(name);
                slot = started;
            }
            order
        };
        assert_eq!(order(AdmissionLimits::default()), "abababab");
        assert_eq!(
            order(AdmissionLimits::default().with_weight(Principal::new("a"), 3)),
            "abaababb",
            "a weight of 3: three turns for one, once both wait"
        );
    }

    #[test]
    fn a_tool_at_its_bound_is_passed_over_for_the_next_task_that_can_run() {
        let admission = Admission::new(
            AdmissionLimits::default()
                .with_max_running(Some(3))
                .with_tool_concurrency("export", 1),
        );
        let a = caller("a");
        let export = run(admission.enter(&a, "export").unwrap());
        let mut second_export = queued(admission.enter(&a, "export").unwrap());
        let _other = run(admission.enter(&a, "build").unwrap());
        assert_eq!(admission.counts(), (2, 1));
        assert!(started(&mut second_export).is_none());
        drop(export);
        assert!(started(&mut second_export).is_some());
    }

    #[test]
    fn unbounded_admission_runs_everything_and_remembers_nobody() {
        let admission = Admission::new(AdmissionLimits::unbounded());
        let slots: Vec<RunSlot> = (0..100)
            .map(|n| run(admission.enter(&caller(&format!("c{n}")), "t").unwrap()))
            .collect();
        assert_eq!(admission.counts(), (100, 0));
        assert!(admission.state().callers.len() <= 1);
        drop(slots);
        assert_eq!(admission.counts(), (0, 0));
    }

    #[test]
    fn queued_messages_say_how_many_are_ahead() {
        assert_eq!(queued_message(0), "queued: next to run");
        assert_eq!(queued_message(1), "queued: 1 task ahead");
        assert_eq!(queued_message(7), "queued: 7 tasks ahead");
    }
}
