/// Fixed-width reads from the file's bytes. Every caller checks that the bytes are there
/// first; the array's own bounds check is the last line of defence, never the first.
extension Array where Element == UInt8 {
    @inline(__always)
    func be16(_ index: Int) -> Int {
        Int(self[index]) &<< 8 | Int(self[index &+ 1])
    }

    @inline(__always)
    func be32(_ index: Int) -> UInt32 {
        UInt32(self[index]) &<< 24 | UInt32(self[index &+ 1]) &<< 16 | UInt32(self[index &+ 2]) &<< 8
            | UInt32(self[index &+ 3])
    }

    @inline(__always)
    func be64(_ index: Int) -> UInt64 {
        UInt64(be32(index)) &<< 32 | UInt64(be32(index &+ 4))
    }

    @inline(__always)
    func le16(_ index: Int) -> Int {
        Int(self[index]) | Int(self[index &+ 1]) &<< 8
    }

    @inline(__always)
    func le32(_ index: Int) -> UInt32 {
        UInt32(self[index]) | UInt32(self[index &+ 1]) &<< 8 | UInt32(self[index &+ 2]) &<< 16
            | UInt32(self[index &+ 3]) &<< 24
    }

    @inline(__always)
    func u16(_ index: Int, little: Bool) -> Int {
        little ? le16(index) : be16(index)
    }

    @inline(__always)
    func u32(_ index: Int, little: Bool) -> UInt32 {
        little ? le32(index) : be32(index)
    }

    @inline(__always)
    func u64(_ index: Int, little: Bool) -> UInt64 {
        little
            ? UInt64(le32(index)) | UInt64(le32(index &+ 4)) &<< 32
            : UInt64(be32(index)) &<< 32 | UInt64(be32(index &+ 4))
    }
}

/// `value` rounded up to a multiple of 4, without overflowing.
@inline(__always)
func padded4(_ value: Int) -> Int {
    value > Int.max - 3 ? Int.max : (value + 3) & ~3
}

/// "0x88cc"-style text with at least `digits` hex digits.
func hex(_ value: Int, digits: Int = 4) -> String {
    var text = TextBuffer()
    text.append("0x")
    text.appendHex(value, minimumDigits: digits)
    return text.string
}
