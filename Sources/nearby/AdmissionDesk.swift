#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import NearbyBasics
import PeerConnection

#if canImport(Glibc)
    import Glibc
#endif

/// `--accept ask` and pairing offers: the thin async shell around ``AdmissionPrompt``. It
/// reads stdin from the start (each line stamped when it arrives), prints questions and
/// notices, keeps one timer for the prompt's next deadline, and hands each answer to the
/// connection that waits for it. On a terminal, input typed but not yet sent (no Enter) is
/// flushed when a question is shown.
actor AdmissionDesk {
    let json: Bool
    private var prompt = AdmissionPrompt()
    private var answers: [Int: CheckedContinuation<Bool, Never>] = [:]
    private var nextNumber = 1
    /// The prompt's next deadline, waited for by a child of the reading task.
    private let alarm = Alarm()
    private let clock = SystemClock()
    private let lines: StandardInput

    init(json: Bool, lines: StandardInput = .shared) {
        self.json = json
        self.lines = lines
    }

    /// Starts reading stdin now, so that lines typed before any question are known as such.
    nonisolated func start() {
        lines.start()
        // Unstructured on purpose: it lives as long as the process (stdin has no other reader,
        // and a read of it cannot be interrupted). Its child keeps the prompt's time, also
        // after the end of input.
        Task { [lines, alarm, clock] in
            await withDiscardingTaskGroup { group in
                group.addTask { await alarm.run(clock: clock) { await self.tick() } }
                while let line = await lines.nextLine() { await self.received(line) }
                await self.inputEnded()
            }
        }
    }

    /// Asks about a peer that wants to connect.
    func ask(_ invitation: PeerListener.Invitation) async -> Bool {
        let subject = AdmissionPrompt.Subject(
            name: invitation.displayName, peerID: invitation.peer.peerID?.description, address: invitation.address, trusted: invitation.isTrusted,
            code: nil)
        return await question(subject, answerBy: invitation.answerBy)
    }

    /// Asks whether the other device of a pairing shows the same code.
    func confirm(_ request: PairingRequest) async -> Bool {
        let subject = AdmissionPrompt.Subject(
            name: request.name, peerID: request.peerID.description, address: request.address, trusted: false, code: request.code)
        return await question(subject, answerBy: request.answerBy)
    }

    private func question(_ subject: AdmissionPrompt.Subject, answerBy: ContinuousClock.Instant) async -> Bool {
        let number = nextNumber
        nextNumber += 1
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                answers[number] = continuation
                perform(prompt.ask(number, about: subject, deadline: clock.time(of: answerBy), at: now))
            }
        } onCancel: {
            // The peer went away (its connection cancels the question's task). The handler
            // runs synchronously, outside the actor: the withdrawal hops in on a task.
            Task { await self.withdraw(number) }
        }
    }

    private var now: Duration { clock.now }

    private func withdraw(_ number: Int) {
        perform(prompt.withdraw(number, at: now))
    }

    private func received(_ line: StandardInput.Line) {
        perform(prompt.receive(line.text, arrivedAt: clock.time(of: line.arrived), at: now))
    }

    private func inputEnded() {
        perform(prompt.endOfInput(at: now))
    }

    private func tick() {
        perform(prompt.advance(to: now))
    }

    private func perform(_ actions: [AdmissionPrompt.Action]) {
        for action in actions {
            switch action {
            case .show(let question, let remaining):
                if !json, isatty(STDIN_FILENO) == 1 { tcflush(STDIN_FILENO, TCIFLUSH) }
                show(question, remaining: remaining)
            case .answer(let number, let accepted):
                answers.removeValue(forKey: number)?.resume(returning: accepted)
            case .notice(let notice):
                say(notice)
            }
        }
        alarm.set(prompt.nextDeadline)
    }

    private func show(_ question: AdmissionPrompt.Question, remaining: Duration) {
        let subject = question.subject
        let within = wholeSeconds(remaining)
        if json {
            var members: [(String, OutputValue)] = [
                ("event", .string("invitation")), ("question", .number(Double(question.number))),
                ("peerID", subject.peerID.map { .string($0) } ?? .null), ("name", .string(subject.name)), ("trusted", .bool(subject.trusted)),
                ("address", .string(subject.address)), ("answerWithinMs", .number(milliseconds(remaining).rounded())),
            ]
            if let code = subject.code { members.append(("code", .string(code))) }
            printLine(JSONText.object(members))
            return
        }
        let who = "\"\(subject.name)\" (peer ID \(subject.peerID ?? "none"), \(subject.trusted ? "trusted" : "not trusted"), from \(subject.address))"
        if let code = subject.code {
            let spaced = code.prefix(3) + " " + code.dropFirst(3)
            printLine(
                "Question \(question.number): pairing with \(who).\n  Code: \(spaced)\n  Does the other device show the same code? [y/N] (answer within \(within) s)")
        } else {
            printLine("Question \(question.number): \(who) wants to connect. Accept? [y/N] (answer within \(within) s)")
        }
    }

    private func say(_ notice: AdmissionPrompt.Notice) {
        let (members, text): ([(String, OutputValue)], String)
        func about(_ question: AdmissionPrompt.Question) -> [(String, OutputValue)] {
            [("question", .number(Double(question.number))), ("peerID", question.subject.peerID.map { .string($0) } ?? .null),
             ("name", .string(question.subject.name))]
        }
        switch notice {
        case .ignored(let line, let why):
            members = [("event", .string("answerIgnored")), ("line", .string(line)), ("reason", .string(why))]
            text = "ignored \"\(line)\": \(why)"
        case .unclear(let line, let question):
            members = [("event", .string("answerUnclear")), ("line", .string(line))] + about(question)
            text = "answer question \(question.number) with y (accept) or n (decline), not \"\(line)\""
        case .answered(let question, let accepted):
            members = [("event", .string("answered")), ("accepted", .bool(accepted))] + about(question)
            text = "\(accepted ? "accepted" : "declined") \"\(question.subject.name)\" (question \(question.number))"
        case .timedOut(let question):
            members = [("event", .string("questionClosed")), ("reason", .string("timedOut"))] + about(question)
            text = "no answer to question \(question.number) in time: \"\(question.subject.name)\" is declined; a later answer counts for nothing"
        case .expiredUnasked(let question):
            members = [("event", .string("questionClosed")), ("reason", .string("expiredUnasked"))] + about(question)
            text = "\"\(question.subject.name)\" is declined: its time ran out while other questions were open"
        case .withdrawn(let question):
            members = [("event", .string("questionClosed")), ("reason", .string("withdrawn"))] + about(question)
            text = "question \(question.number) is withdrawn: \"\(question.subject.name)\" went away"
        case .noInput(let question):
            members = [("event", .string("questionClosed")), ("reason", .string("noInput"))] + about(question)
            text = "\"\(question.subject.name)\" is declined: standard input is closed, so nobody can answer"
        }
        if json {
            printLine(JSONText.object(members))
        } else {
            writeToStandardError("nearby: \(text)\n")
        }
    }
}
