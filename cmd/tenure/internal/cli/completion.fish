# fish completion for tenure.
# Load it with: tenure completion fish | source
# tenure itself says what to offer: tenure __complete WORD...

function __tenure_complete
    set -l words (commandline -opc) (commandline -ct)
    set -l answer ($words[1] __complete $words[2..-1] 2>/dev/null)
    or return
    switch "$answer"
        case :files :dirs
            set -l token (commandline -ct)
            set -l flag (string match -r -- '^-[^=]*=' $token)
            or set flag ''
            set -l value (string replace -r -- '^-[^=]*=' '' $token)
            if test "$answer" = :dirs
                printf '%s\n' $flag(__fish_complete_directories $value)
            else
                printf '%s\n' $flag(__fish_complete_path $value)
            end
        case '*'
            printf '%s\n' $answer
    end
end

complete -c tenure -f -a '(__tenure_complete)'
