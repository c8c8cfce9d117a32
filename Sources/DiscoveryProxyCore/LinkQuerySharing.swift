public import DNSWire

/// Between the answering machine and the one link querier, as a pure value: the machine asks
/// per link, the querier asks per question (one continuous mDNS query on all the links'
/// interfaces serves every link that asks it). This decides what the querier is told, in
/// order, and keeps the race of a shared question honest.
///
/// - The first link to ask a question starts the query; a second one is not asked again: what
///   the querier already knows for that link's interface is replayed to it. The last link to
///   stop it stops the query.
/// - A replay reads the querier's cache while the link goes on reporting: a record reported
///   gone (or said goodbye to) for that link between the replay's start and its end is left
///   out of the replay, so that the replay never brings it back.
/// - A record is reconfirmed at most once per ``reconfirmInterval``: one reconfirmation is two
///   queries a second apart and the record goes about ten seconds later if nobody answers
///   (RFC 6762 §10.4), so more RECONFIRMs for it meanwhile (a client that sends them in a loop)
///   would only add multicast and work. They are counted in ``reconfirmsCoalesced``.
public struct LinkQuerySharing: Sendable {
    /// What the link querier is told, in this order.
    public enum Work: Sendable, Equatable {
        case start([LinkQuestion])
        case stop(LinkQuestion)
        /// Read what is known for the question on the link's interface, and give it to
        /// ``LinkQuerySharing/replayed(_:question:link:)``.
        case replay(LinkQuestion, LinkIndex)
        case reconfirm(ResourceRecord)
    }

    /// What one link question learned in a batch of reports.
    public struct Change: Sendable, Equatable {
        public var link: LinkIndex
        public var question: LinkQuestion
        public var added: [ResourceRecord] = []
        public var removed: [ResourceRecord] = []
    }

    public static let reconfirmInterval: Duration = .seconds(10)

    /// Each link's interface (link `i` is heard on `interfaces[i]`).
    public let interfaces: [String]
    private let linksOfInterface: [String: [LinkIndex]]
    /// The links each query serves.
    private var asking: [LinkQuestion: Set<LinkIndex>] = [:]
    /// Replays under way, with the records reported gone meanwhile.
    private var replaying: [ProxyStateMachine.LinkKey: Set<RecordKey>] = [:]
    /// Records reconfirmed, and when.
    private var reconfirmed: [RecordKey: Duration] = [:]
    public private(set) var reconfirmsCoalesced = 0

    public init(interfaces: [String]) {
        self.interfaces = interfaces
        var links: [String: [LinkIndex]] = [:]
        for (index, interface) in interfaces.enumerated() { links[interface, default: []].append(LinkIndex(index)) }
        linksOfInterface = links
    }

    /// The questions the querier is asked now, for status and tests.
    public var questions: Set<LinkQuestion> { Set(asking.keys) }

    /// The querier's work for the machine's actions (replies and pushes are not the querier's,
    /// and are left out). New questions are started together, after the rest.
    public mutating func work(for actions: [ProxyStateMachine.Action], now: Duration) -> [Work] {
        var work: [Work] = []
        var starts: [LinkQuestion] = []
        for action in actions {
            switch action {
            case .reply, .drop, .push:
                continue
            case .reconfirmOnLink(_, let record):
                let key = RecordKey(record)
                if let last = reconfirmed[key], now - last < Self.reconfirmInterval {
                    reconfirmsCoalesced += 1
                    continue
                }
                reconfirmed = reconfirmed.filter { now - $0.value < Self.reconfirmInterval }
                reconfirmed[key] = now
                work.append(.reconfirm(record))
            case .startLinkQuestion(let link, let question):
                if asking[question] != nil {
                    asking[question]?.insert(link)
                    if starts.contains(question) { continue }  // started in this batch: its first report is every link's
                    replaying[.init(link: link, question: question)] = []
                    work.append(.replay(question, link))
                } else {
                    asking[question] = [link]
                    starts.append(question)
                }
            case .stopLinkQuestion(let link, let question):
                replaying[.init(link: link, question: question)] = nil
                guard asking[question]?.remove(link) != nil, asking[question]?.isEmpty == true else { continue }
                asking[question] = nil
                if let waiting = starts.firstIndex(of: question) {
                    starts.remove(at: waiting)  // never asked: nothing to stop
                } else {
                    work.append(.stop(question))
                }
            }
        }
        if !starts.isEmpty { work.append(.start(starts)) }
        return work
    }

    /// The querier's reports, as each link's changes per question, in the order the reports
    /// came; a record gone during a replay for its link is noted.
    public mutating func reported(_ reports: [(interface: String, record: ResourceRecord, added: Bool)]) -> [Change] {
        var changes: [Change] = []
        var index: [ProxyStateMachine.LinkKey: Int] = [:]
        for report in reports {
            let question = LinkQuestion(name: report.record.name, type: report.record.type)
            for link in linksOfInterface[report.interface] ?? [] {
                let key = ProxyStateMachine.LinkKey(link: link, question: question)
                if !report.added || report.record.isGoodbye, replaying[key] != nil {
                    replaying[key]?.insert(RecordKey(report.record))
                }
                let at = index[key] ?? changes.count
                if at == changes.count {
                    index[key] = at
                    changes.append(Change(link: link, question: question))
                }
                if report.added { changes[at].added.append(report.record) } else { changes[at].removed.append(report.record) }
            }
        }
        return changes
    }

    /// What the querier knew for a replay: the records to give the link, without those
    /// reported gone while it was read.
    public mutating func replayed(_ records: [ResourceRecord], question: LinkQuestion, link: LinkIndex) -> [ResourceRecord] {
        let gone = replaying.removeValue(forKey: .init(link: link, question: question)) ?? []
        return records.filter { !gone.contains(RecordKey($0)) }
    }
}
