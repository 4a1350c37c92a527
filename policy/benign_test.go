package policy

import (
	"testing"
)

// benign are everyday commands of coding agents: builds, tests, git
// history and diffs, package managers, search tools, here-documents that
// write files. The guarded profile must let every one run without asking.
var benign = []string{
	// the three false prompts of issue 12
	`NODE_OPTIONS=--max-old-space-size=4096 npm run build`,
	`LD_LIBRARY_PATH=./build/lib ./build/bin/app`,
	`"$(go env GOPATH)/bin/golangci-lint" run ./...`,
	// builds
	`go build ./...`,
	`go vet ./... && gofmt -l .`,
	`go test -race -count=1 ./internal/...`,
	`go test -run 'TestParse|TestWalk' -v ./safety 2>&1 | tail -n 40`,
	`go mod tidy && git diff --stat go.mod go.sum`,
	`go generate ./...`,
	`CGO_ENABLED=0 GOOS=linux go build -o bin/app ./cmd/app`,
	`go install golang.org/x/tools/cmd/goimports@latest`,
	`"$(go env GOPATH)/bin/goimports" -w .`,
	`make -j4`,
	`make test 2>&1 | tail -50`,
	`make clean && make`,
	`cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j 2`,
	`ninja -C build`,
	`cargo build --release`,
	`cargo test -- --nocapture`,
	`cargo clippy --all-targets -- -D warnings`,
	`cargo fmt --check`,
	`RUST_BACKTRACE=1 cargo run -- --help`,
	`npm ci`,
	`npm install --save-dev typescript@5`,
	`npm test -- --watch=false`,
	`npm run lint -- --fix`,
	`npx tsc --noEmit`,
	`npx prettier --write "src/**/*.ts"`,
	`npx jest src/utils --coverage`,
	`pnpm install --frozen-lockfile`,
	`yarn build && yarn test`,
	`node scripts/build.js`,
	`NODE_ENV=production node dist/server.js`,
	`python3 -m venv .venv && . .venv/bin/activate && pip install -r requirements.txt`,
	`source .venv/bin/activate && pytest -q`,
	`pip install -e '.[dev]'`,
	`python -m pytest tests/test_api.py -k login -x`,
	`PYTHONPATH=src python3 -m mypackage.cli --help`,
	`python3 -m mypy src`,
	`ruff check . --fix`,
	`black --check .`,
	`uv sync && uv run pytest`,
	`poetry install && poetry run pytest`,
	`mvn -q -DskipTests package`,
	`./gradlew test --info`,
	`dotnet build && dotnet test`,
	`bundle install && bundle exec rspec`,
	`rake db:migrate`,
	`php artisan test`,
	`composer install`,
	`tsc -p tsconfig.json`,
	`docker build -t app:dev .`,
	`docker compose up -d db && docker compose ps`,
	`docker run --rm -v "$PWD":/src -w /src golang:1.26 go test ./...`,
	`docker logs --tail 100 app`,
	`kubectl get pods -n staging`,
	`terraform plan -out=tfplan`,
	// git history and diffs
	`git status`,
	`git status --short --branch`,
	`git diff`,
	`git diff --cached`,
	`git diff HEAD~3..HEAD -- src/`,
	`git diff main...feature --stat`,
	`git log --oneline -20`,
	`git log --graph --decorate --all --oneline | head -40`,
	`git log -p -n 3 -- README.md`,
	`git show HEAD --stat`,
	`git show abc1234:src/main.go | head -50`,
	`git blame -L 10,40 src/main.go`,
	`git branch -a`,
	`git branch --show-current`,
	`git checkout -b feature/login`,
	`git switch main`,
	`git checkout -- src/main.go`,
	`git restore --staged src/main.go`,
	`git add src/main.go src/main_test.go`,
	`git add -u`,
	`git add -p`,
	`git commit -m "fix: handle empty input"`,
	`git commit --amend --no-edit`,
	`git push -u origin feature/login`,
	`git push --force-with-lease origin feature/login`,
	`git pull --rebase origin main`,
	`git fetch --all --prune`,
	`git rebase -i HEAD~3`,
	`GIT_EDITOR=true git rebase --continue`,
	`git merge --no-ff feature`,
	`git stash push -m wip && git stash list`,
	`git stash pop`,
	`git cherry-pick abc1234`,
	`git tag -a v1.2.0 -m "release 1.2.0"`,
	`git remote -v`,
	`git rev-parse --abbrev-ref HEAD`,
	`git ls-files | wc -l`,
	`git grep -n "TODO" -- '*.go'`,
	`git config user.name "Agent"`,
	`git -c core.pager=cat log -1`,
	`GIT_PAGER=cat git log -5`,
	`git worktree add ../wt-feature feature`,
	`git clean -n`,
	`git reset HEAD~1 --soft`,
	`git bisect start HEAD v1.0`,
	`cd "$(git rev-parse --show-toplevel)" && make test`,
	// search and reading
	`rg -n "func main" --type go`,
	`rg -l TODO src | head`,
	`grep -rn "password" --include=*.py .`,
	`grep -E '^(import|from) ' app.py | sort | uniq -c`,
	`find . -name "*.go" -not -path "./vendor/*" | xargs wc -l | tail -1`,
	`find . -type f -name '*.log' -mtime +7 -delete`,
	`find . -name node_modules -prune -o -name '*.ts' -print`,
	`fd -e py | head`,
	`ls -la`,
	`ls -R src | head -100`,
	`tree -L 2 -I node_modules`,
	`cat package.json | jq '.scripts'`,
	`jq -r '.dependencies | keys[]' package.json`,
	`head -n 50 src/main.go`,
	`tail -f /tmp/server.log & sleep 2; kill %1`,
	`sed -n '100,160p' src/parser.go`,
	`awk -F, '{print $2}' data.csv | sort -u | head`,
	`wc -l src/*.go`,
	`du -sh node_modules`,
	`diff -u old.txt new.txt`,
	`file bin/app`,
	`which go node python3`,
	`echo $PATH | tr ':' '\n'`,
	`env | grep -i proxy`,
	`curl -s http://localhost:8080/health`,
	`curl -sSf -o /tmp/data.json https://api.example.com/data`,
	`wget -q https://example.com/file.tar.gz && tar xzf file.tar.gz`,
	`ps aux | grep -v grep | grep node`,
	`lsof -i :3000`,
	`kill $(lsof -t -i :3000)`,
	`sleep 2 && curl -s localhost:3000`,
	`timeout 60 npm run dev`,
	// files and here-documents
	`mkdir -p src/components && touch src/components/Button.tsx`,
	`cp .env.example .env`,
	`mv src/old.go src/new.go`,
	`rm -rf node_modules dist`,
	`rm -rf ./build ./coverage`,
	`rm -f /tmp/test.db`,
	`rm -rf "$TMPDIR/agent-cache"`,
	`chmod +x scripts/*.sh`,
	`ln -sf ../config/dev.yaml config.yaml`,
	`tar czf backup.tgz src/`,
	`unzip -o assets.zip -d public/`,
	`cat > src/config.ts <<'EOF'
export const config = { port: 3000 };
EOF`,
	`cat <<EOF > .env
PORT=3000
HOME_DIR=$HOME
EOF`,
	`cat >> README.md <<'EOF'

## Development
Run make test.
EOF`,
	`tee docs/notes.md > /dev/null <<'EOF'
notes
EOF`,
	`printf '%s\n' "line one" "line two" > out.txt`,
	`echo "export PATH=\$PATH:/usr/local/go/bin" >> ~/.bashrc`,
	`python3 - <<'EOF'
import json
print(json.dumps({"ok": True}))
EOF`,
	`for f in src/*.ts; do echo "$f"; done`,
	`for i in $(seq 1 3); do go test ./... || break; done`,
	`while read -r line; do echo "$line"; done < list.txt`,
	`if [ -f go.mod ]; then go build ./...; else make; fi`,
	`[[ -d build ]] || mkdir build`,
	`export PATH="$HOME/.local/bin:$PATH" && mytool --version`,
	`VERSION=$(git describe --tags) && echo "$VERSION"`,
	`x=$(date +%s); echo "started $x"`,
	`sudo apt-get update && sudo apt-get install -y jq`,
	`brew install ripgrep`,
	`ssh-keygen -t ed25519 -f /tmp/testkey -N ""`,
	`openssl rand -hex 16`,
	`base64 -d <<< aGVsbG8= > hello.txt`,
	`watch -n 2 kubectl get pods`,
	`nohup ./server > server.log 2>&1 &`,
	`bash scripts/setup.sh`,
	`sh -c 'cd web && npm test'`,
	`bash -c "echo hello"`,
	`./configure --prefix=/usr/local && make && sudo make install`,
	`tmp=$(mktemp -d) && git clone -q . "$tmp/repo" && rm -rf "$tmp"`,
	`LD_LIBRARY_PATH=$PWD/build/lib ./build/bin/app --version`,
	`export NODE_OPTIONS=--openssl-legacy-provider && npm start`,
	`find . -type d -name __pycache__ -exec rm -rf {} +`,
	`rm -rf .pytest_cache .mypy_cache */node_modules`,
	`npm run build 2>&1 | tee build.log`,
	`docker exec app bash -c 'rm -rf /app/tmp/*'`,
	`git log --format='%H %s' | head -20`,
}

func TestBenignCorpus(t *testing.T) {
	if len(benign) < 150 {
		t.Fatalf("only %d benign commands", len(benign))
	}
	e, err := NewEngine(Guarded, nil)
	if err != nil {
		t.Fatal(err)
	}
	prompts := 0
	for _, cmd := range benign {
		d := e.Check(Request{Tool: "bash", Command: cmd, Shell: "bash", Cwd: "/work/project"})
		if d.Verdict != Allow {
			prompts++
			t.Errorf("%q: %s (%s: %s)", cmd, d.Verdict, d.Rule, d.Reason)
		}
	}
	t.Logf("benign corpus: %d commands, %d prompts", len(benign), prompts)
}

// TestLostWorkAsks: git-discard-work and unknown destructive targets ask
// in guarded (with a reason and an alternative), deny nothing, and are
// switchable like the other built-in rules.
func TestLostWorkAsks(t *testing.T) {
	e, err := NewEngine(Guarded, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ cmd, rule string }{
		{`git reset --hard`, "git-discard-work"},
		{`git clean -fdx`, "git-discard-work"},
		{`git checkout -- .`, "git-discard-work"},
		{`git stash clear`, "git-discard-work"},
		{`git branch -D topic`, "git-discard-work"},
		{`git push origin :topic`, "git-discard-work"},
		{`rm -rf "$BUILD_DIR"`, RuleDynamicArgument},
		{`find "$1" -delete`, RuleDynamicArgument},
		{`LD_LIBRARY_PATH=/usr/local/lib ./app`, "loader-env"},
		{`PYTHONPATH=/opt/lib python3 x.py`, "loader-env"},
	} {
		d := e.Check(Request{Tool: "bash", Command: c.cmd, Cwd: "/w"})
		if d.Verdict != Ask || d.Rule != c.rule || d.Reason == "" || d.Alternative == "" {
			t.Errorf("%q: %+v", c.cmd, d)
		}
	}
	// HOME-wide removals are rm-critical, preloads loader-env: refused.
	for _, cmd := range []string{`LD_PRELOAD=./x.so ./app`, `rm -rf ~/Documents`, `find ~ -delete`, `rsync -a --delete x/ ~/`, `chmod -R 777 ~`} {
		if d := e.Check(Request{Tool: "bash", Command: cmd}); d.Verdict != Deny || d.Rule != "rm-critical" && d.Rule != "loader-env" {
			t.Errorf("%q: %+v", cmd, d)
		}
	}
	if d := e.Check(Request{Tool: "bash", Command: `rm -rf ~/Documents`}); d.Message() != "permission denied: this rm command could delete critical data (.git, home directory, or root). Specify the full path explicitly (no wildcards, ~, or $HOME)" {
		t.Errorf("seed message: %q", d.Message())
	}
	// switchable
	off, err := NewEngine(Guarded, []Rule{
		{ID: "allow-discard", Action: Allow, Builtin: "git-discard-work", MustMatch: []string{"git reset --hard"}},
		{ID: "deny-dynamic", Action: Deny, Builtin: RuleDynamicArgument, MustMatch: []string{`rm -rf "$X"`}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := off.Check(Request{Tool: "bash", Command: "git reset --hard"}); d.Verdict != Allow {
		t.Errorf("switched off: %+v", d)
	}
	if d := off.Check(Request{Tool: "bash", Command: `rm -rf "$X"`}); d.Verdict != Deny || d.Rule != "deny-dynamic" {
		t.Errorf("dynamic-argument denied by rule: %+v", d)
	}
	// strict asks, open runs
	open, _ := NewEngine(Open, nil)
	if d := open.Check(Request{Tool: "bash", Command: "git reset --hard"}); d.Verdict != Allow {
		t.Errorf("open: %+v", d)
	}
}
