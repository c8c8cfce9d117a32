// The link's side (RFC 8766 §5.6, §9.3): what the link questions learn, when a waiting
// question is answered, follow-up address questions, idle and evicted link questions.
public import DNSWire

extension ProxyStateMachine {
    // MARK: The link

    /// A link question learned records, or lost them. Records of other names or types, which
    /// a querier may hand over too, are ignored.
    public mutating func linkChanged(
        _ link: LinkIndex, _ question: LinkQuestion, added: [ResourceRecord], removed: [ResourceRecord], now: Duration
    ) -> [Action] {
        let key = Key(link: link, question: question)
        guard var state = questions[key] else { return [] }
        var gone: [ResourceRecord] = []
        var came: [ResourceRecord] = []
        for record in removed {
            if let old = state.records.removeValue(forKey: RecordKey(record)) { gone.append(old) }
        }
        for record in added where record.name == question.name && record.type == question.type {
            if record.isGoodbye {
                if let old = state.records.removeValue(forKey: RecordKey(record)) { gone.append(old) }
            } else if state.records[RecordKey(record)] != nil || state.records.count < configuration.maximumRecordsPerQuestion {
                state.records[RecordKey(record)] = record
                came.append(record)
            } else {
                statistics.recordsOverLimit += 1
            }
        }
        if !added.isEmpty || !removed.isEmpty {
            linkVersion &+= 1
            state.answer = nil
        }
        if !state.settled, state.firstAnswer == nil, !state.records.isEmpty { state.firstAnswer = now }
        questions[key] = state
        var actions: [Action] = []
        if !state.subscribers.isEmpty, !(came.isEmpty && gone.isEmpty) {
            // Subscribers hear each change with the record's own TTL (RFC 8766 §5.5.1).
            let translation = translations[link.rawValue]
            var changes = translate(came, translation, cap: Self.maximumPushTTL).map(PushChange.add)
            changes += translate(gone.map { var record = $0; record.ttl = 1; return record }, translation, cap: Self.maximumPushTTL).map { .remove($0) }
            if !changes.isEmpty {
                for subscriber in state.subscribers.sorted(by: { ($0.session.rawValue, $0.id) < ($1.session.rawValue, $1.id) }) {
                    actions.append(.push(subscriber.session, changes))
                }
            }
        }
        return actions + advance(to: now)
    }

    // MARK: Time

    /// Time has come to `now`: questions whose gathering time is over are answered, and link
    /// questions nobody asks about any more are stopped.
    public mutating func advance(to now: Duration) -> [Action] {
        var actions: [Action] = []
        let due = unsettled.filter { key in questions[key].map { deadline(of: key, $0) <= now } ?? true }
        for key in due.sorted(by: { ($0.link, $0.question.name.description, $0.question.type) < ($1.link, $1.question.name.description, $1.question.type) }) {
            guard var state = questions[key] else {
                unsettled.remove(key)
                continue
            }
            state.settled = true
            let waiters = state.waiters
            state.waiters = []
            questions[key] = state
            unsettled.remove(key)
            for waiter in waiters {
                stopWaiting(waiter.source)
                let zone = configuration.zones[waiter.link.rawValue]
                statistics.answered += 1
                actions.append(.reply(waiter.request, answer(waiter.query, key: key, zone: zone, transport: waiter.transport)))
            }
            if !waiters.isEmpty { actions += followUps(after: key, now: now) }
        }
        if now >= nextSweep {
            nextSweep = now + max(configuration.idleLifetime, .seconds(1)) / 4
            for (key, state) in questions where state.settled && state.subscribers.isEmpty && now - state.lastAsked >= configuration.idleLifetime {
                questions[key] = nil
                // Its records leave the answers (and kept replies) with it.
                linkVersion &+= 1
                statistics.linkQuestionsStopped += 1
                actions.append(.stopLinkQuestion(key.link, key.question))
            }
            limiter?.forget(before: now - .seconds(10))
        }
        return actions
    }

    func deadline(of key: Key, _ state: QuestionState) -> Duration {
        let timeout = state.started + configuration.answerTimeout
        guard let first = state.firstAnswer else { return timeout }
        return min(timeout, first + gathering(for: key.question.type))
    }

    /// How long a new question gathers after its first answer: a shared question (PTR) the
    /// gathering time; a host's own SRV or TXT (one record set, in one message) nothing; its
    /// addresses, and any other type, a moment (avahi's dns_sd hands a host's addresses over
    /// one callback at a time).
    func gathering(for type: RecordType) -> Duration {
        switch type {
        case .ptr: configuration.gatherTime
        case .srv, .txt: .zero
        default: configuration.addressGatherTime
        }
    }

    /// Room for one more link question: the one asked about longest ago is stopped when the
    /// limit is reached. Nil when every question is still waiting for the link.
    mutating func makeRoom(now: Duration) -> [Action]? {
        guard questions.count >= configuration.maximumLinkQuestions else { return [] }
        guard let oldest = questions.filter({ $0.value.settled && $0.value.subscribers.isEmpty }).min(by: { $0.value.lastAsked < $1.value.lastAsked }) else { return nil }
        questions[oldest.key] = nil
        linkVersion &+= 1
        statistics.linkQuestionsEvicted += 1
        statistics.linkQuestionsStopped += 1
        return [.stopLinkQuestion(oldest.key.link, oldest.key.question)]
    }

    /// After an SRV answer, the target's addresses are asked for too, so that the next
    /// question (or the next SRV answer's additional section) finds them.
    mutating func followUps(after key: Key, now: Duration) -> [Action] {
        guard key.question.type == .srv, let state = questions[key] else { return [] }
        var actions: [Action] = []
        var targets: Set<DomainName> = []
        for record in state.records.values {
            if case .srv(let srv) = record.data, srv.target.hasSuffix(ProxyZone.linkDomain) { targets.insert(srv.target) }
        }
        for target in targets.sorted(by: { $0.description < $1.description }) {
            for type in [RecordType.a, .aaaa] {
                let follow = Key(link: key.link, question: LinkQuestion(name: target, type: type))
                if questions[follow] != nil {
                    questions[follow]?.lastAsked = now
                    continue
                }
                guard linkBudget.take(now: now), let made = makeRoom(now: now) else { return actions }
                actions += made
                // Nobody waits on it yet; a question that comes before its gathering time is
                // over waits like any first question, rather than getting "no records" from a
                // link that has not been asked long enough to answer.
                questions[follow] = QuestionState(started: now, lastAsked: now)
                unsettled.insert(follow)
                statistics.linkQuestionsStarted += 1
                actions.append(.startLinkQuestion(key.link, follow.question))
            }
        }
        return actions
    }
}
