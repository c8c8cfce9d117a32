import DNSWire
import DiscoveryProxyCore
import Logging
import NearbyBasics

/// The proxy's link side: the one link querier (Nearby's engine or the host's daemon), told what
/// to ask as ``LinkQuerySharing`` decides from the answering machine's actions, and its reports
/// handed back to the machine through the desk.
actor ProxyLinks {
    private let querier: any LinkQuerier
    private var sharing: LinkQuerySharing
    /// The querier's work, carried out in order by one child of ``run()``. Not bounded by a
    /// count, because no item may be merged or dropped (each is a decision the querier must
    /// follow, in order): new questions come at most at the machine's link-question rate (50 a
    /// second by default) and up to its maximum, stops and replays only for those, and
    /// reconfirms once per record per 10 s.
    private let work: AsyncStream<[LinkQuerySharing.Work]>
    private let workQueue: AsyncStream<[LinkQuerySharing.Work]>.Continuation
    private let desk: AnsweringDesk
    /// The proxy's alarm: what the link says may give the machine an earlier deadline.
    private let alarm: Alarm
    private let clock: any ShellClock

    init(querier: any LinkQuerier, interfaces: [String], desk: AnsweringDesk, alarm: Alarm, clock: any ShellClock) {
        self.querier = querier
        sharing = LinkQuerySharing(interfaces: interfaces)
        // Bounded by rate, not count: new link questions by the link-question budget,
        // reconfirmations by one per record per 10 s (see `work`).
        (work, workQueue) = AsyncStream.makeStream()
        self.desk = desk
        self.alarm = alarm
        self.clock = clock
    }

    /// The querier, its work and its reports, until cancelled.
    func run() async {
        let (querier, work, clock, interfaces) = (querier, work, clock, sharing.interfaces)
        await withDiscardingTaskGroup { group in
            group.addTask { await querier.run() }
            group.addTask {
                await withDiscardingTaskGroup { reconfirms in
                    for await items in work {
                        for item in items {
                            switch item {
                            case .start(let questions): await querier.start(questions)
                            case .stop(let question): await querier.stop(question)
                            case .replay(let question, let link):
                                let known = await querier.known(question, interface: interfaces[link.rawValue])
                                await self.replayed(known, question: question, link: link)
                            case .reconfirm(let record):
                                // Twice, a second apart: two unanswered queries flush it (§10.5).
                                reconfirms.addTask {
                                    await querier.reconfirm(record)
                                    try? await clock.sleep(for: .seconds(1))
                                    await querier.reconfirm(record)
                                }
                            }
                        }
                    }
                }
            }
            group.addTask {
                for await batch in querier.reports { await self.reported(batch) }
            }
        }
    }

    /// The link questions the machine's actions start and stop, and the records it wants
    /// reconfirmed, queued for the querier in the machine's order.
    func perform(_ actions: [ProxyStateMachine.Action]) {
        let items = sharing.work(for: actions, now: clock.now)
        if !items.isEmpty { workQueue.yield(items) }
    }

    /// No more work; the querier stops.
    func shutdown() async {
        workQueue.finish()
        await querier.shutdown()
    }

    private func reported(_ batch: [LinkReport]) {
        let changes = sharing.reported(batch.map { ($0.interface, $0.record, $0.added) })
        let now = clock.now
        desk.act { machine in
            changes.flatMap { machine.linkChanged($0.link, $0.question, added: $0.added, removed: $0.removed, now: now) }
        }
        alarm.set(desk.nextDeadline)
    }

    private func replayed(_ records: [ResourceRecord], question: LinkQuestion, link: LinkIndex) {
        let current = sharing.replayed(records, question: question, link: link)
        let now = clock.now
        desk.act { $0.linkChanged(link, question, added: current, removed: [], now: now) }
        alarm.set(desk.nextDeadline)
    }
}
